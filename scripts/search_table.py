"""Benchmark: the search placers against the best one-pass placer (issue 9).

For every graph x cluster: every one-pass placer (the heuristics), then each
search placer started from the best of them with --budget_s seconds; prints
a table (step time, x lower bound, search seconds, evaluations, evaluations
per second, CP-SAT's status and gap) and the targets:
  * local_search <= the best heuristic everywhere;
  * local_search >= 15 % faster than the best heuristic on Inception-V3 on
    k80x4;
  * cp_sat solved to a reported gap (on its coarsened model).
Graphs: the seed benchmarks (rnnlm, nmt, inception_v3) and synthetic graphs
no heuristic was tuned on (`tfplace.models.synthetic`: a layered DAG and a
towers training step). Writes table.md and table.json to --out_dir.

  python scripts/search_table.py                       # the full 60-s table
  python scripts/search_table.py --budget_s 5 --graphs towers,layered_dag
  python scripts/search_table.py --local_search_options unit_fraction=0
"""

import json
import os
import sys
import time

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.cli.app_runner import run_app, start_script

start_script("search_table")  # Ctrl-C, TF's start-up lines: from here.

from absl import flags, logging

from tfplace.cost.presets import load_cluster
from tfplace.errors import TfplaceError
from tfplace.experiments.compare_placers import (BASELINE_PLACERS,
                                                  SEARCH_PLACERS,
                                                  compare_with_searches,
                                                  search_figures)
from tfplace.io_utils import atomic_write
from tfplace.placers.options import parse_option_text
from tfplace.placers.registry import get_placer

FLAGS = flags.FLAGS
flags.DEFINE_list("graphs", ["rnnlm", "nmt", "inception_v3", "layered_dag",
                             "towers"], "benchmark models and synthetic graphs")
flags.DEFINE_list("clusters", ["k80x2", "k80x4"], "cluster presets")
flags.DEFINE_list("searches", list(SEARCH_PLACERS), "search placers")
flags.DEFINE_float("budget_s", 60.0, "seconds each search may take")
flags.DEFINE_integer("num_threads", 0,
                     "simulator threads per search (0: every core)")
flags.DEFINE_string("local_search_options", "",
                    "more local_search options, e.g. unit_fraction=0 (the "
                    "colocation groups alone, no first stage over units)")
flags.DEFINE_integer("seed", 0, "random seed")
flags.DEFINE_string("out_dir", None, "where to write table.md and table.json")

# Synthetic graphs and their sizes.
SYNTHETIC = {"layered_dag": dict(num_ops=2000, width=40, seed=1),
             "towers": dict(num_towers=8, layers=6, batch=128, hidden=1024,
                            seed=2)}
TARGET_GAIN = 0.15  # local_search vs the best heuristic, inception_v3/k80x4.


def _build(name: str):
  if name in SYNTHETIC:
    from tfplace.models.synthetic import build_synthetic
    return build_synthetic(name, **SYNTHETIC[name])
  from tfplace.models.registry import build_model, list_models
  if name not in list_models():
    raise TfplaceError(f"unknown graph {name!r}; choose from "
                       f"{list_models() + sorted(SYNTHETIC)}")
  return build_model(name)


def _rows(graph, cluster_name: str) -> dict:
  """One graph x cluster: every run, the best heuristic and the targets."""
  options = {s: {"num_threads": FLAGS.num_threads, "progress": False}
             for s in FLAGS.searches}
  if "local_search" in options:
    options["local_search"].update(
        parse_option_text(FLAGS.local_search_options))
  comparison = compare_with_searches(
      graph, load_cluster(cluster_name), BASELINE_PLACERS, FLAGS.searches,
      FLAGS.budget_s, seed=FLAGS.seed, progress=False,
      search_options=options)
  runs = list(comparison.runs)
  baselines = [r for r in runs if r.placer not in FLAGS.searches]
  best = min((r for r in baselines if r.feasible),
             key=lambda r: r.step_time_s, default=None)
  lower = comparison.lower_bound_s
  rows = []
  for run in [best] + [r for r in runs if r.placer in FLAGS.searches]:
    if run is None:
      continue
    figures = search_figures(run)
    rows.append({
        "placer": run.placer if figures else f"best heuristic ({run.placer})",
        "step_time_s": run.step_time_s if run.feasible else None,
        "x_lower_bound": run.step_time_s / lower if run.feasible else None,
        "search_s": figures.get("seconds"),
        "evaluations": figures.get("evaluations"),
        "evaluations_per_s": figures.get("evaluations_per_s"),
        "solver_status": figures.get("solver_status"),
        "gap": figures.get("gap"), "placement_time_s": run.placement_time_s})
  return {"graph": graph.name, "cluster": cluster_name,
          "num_ops": graph.num_ops, "lower_bound_s": lower,
          "best_heuristic": best.placer if best else None,
          "best_heuristic_s": best.step_time_s if best else None,
          "rows": rows}


def _targets(results) -> list:
  """(description, met) for each target."""
  checks = []
  for res in results:
    by = {r["placer"]: r for r in res["rows"]}
    where = f"{res['graph']}/{res['cluster']}"
    ls, cp = by.get("local_search"), by.get("cp_sat")
    if ls and res["best_heuristic_s"]:
      gain = 1 - (ls["step_time_s"] or float("inf")) / res["best_heuristic_s"]
      checks.append((f"{where}: local_search <= best heuristic "
                     f"({gain:+.1%})", gain >= -1e-12))
      if where == "inception_v3/k80x4":
        checks.append((f"{where}: local_search >= {TARGET_GAIN:.0%} faster "
                       f"than the best heuristic ({gain:.1%})",
                       gain >= TARGET_GAIN))
    if cp:
      gap = "none" if cp["gap"] is None else f"{cp['gap']:.1%}"
      checks.append((f"{where}: cp_sat gap reported ({cp['solver_status']}, "
                     f"gap {gap})", cp["gap"] is not None))
  return checks


def _markdown(results, checks) -> str:
  lines = [f"Search budget {FLAGS.budget_s:g} s per search; step times are "
           "simulated seconds.", "",
           "| graph | cluster | placer | step time (s) | x lower bound | "
           "search (s) | evaluations | evaluations/s | CP-SAT |",
           "|---|---|---|---|---|---|---|---|---|"]
  for res in results:
    for r in res["rows"]:
      step = "OOM" if r["step_time_s"] is None else f"{r['step_time_s']:.4g}"
      ratio = "" if r["x_lower_bound"] is None else f"{r['x_lower_bound']:.2f}"
      cp = (f"{r['solver_status']}, gap {r['gap']:.1%}" if r["gap"] is not None
            else r["solver_status"] or "")
      lines.append(f"| {res['graph']} | {res['cluster']} | {r['placer']} | "
                   f"{step} | {ratio} | {_cell(r['search_s'])} | "
                   f"{_cell(r['evaluations'])} | "
                   f"{_cell(r['evaluations_per_s'])} | {cp} |")
  lines += ["", "Targets:"] + [f"- [{'x' if ok else ' '}] {text}"
                               for text, ok in checks]
  return "\n".join(lines) + "\n"


def _cell(value) -> str:
  return "" if value is None else f"{value:g}"


def main(argv):
  del argv
  for name in FLAGS.clusters:
    load_cluster(name)  # Bad names fail before any work.
  if "local_search" in FLAGS.searches:  # So do bad options.
    get_placer("local_search",
               parse_option_text(FLAGS.local_search_options))
  results, start = [], time.perf_counter()
  for name in FLAGS.graphs:
    graph = _build(name)
    for cluster in FLAGS.clusters:
      logging.info("%s on %s", name, cluster)
      results.append(_rows(graph, cluster))
      print(f"done {name}/{cluster} ({time.perf_counter() - start:.0f} s)",
            flush=True)
  checks = _targets(results)
  markdown = _markdown(results, checks)
  print(markdown)
  if FLAGS.out_dir:
    atomic_write(os.path.join(FLAGS.out_dir, "table.md"), markdown)
    atomic_write(os.path.join(FLAGS.out_dir, "table.json"), json.dumps(
        {"budget_s": FLAGS.budget_s, "results": results,
         "targets": [{"target": t, "met": ok} for t, ok in checks]},
        indent=1))


if __name__ == "__main__":
  run_app(main, sys.argv, "search_table")
