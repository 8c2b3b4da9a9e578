"""Benchmark: check the winners on real runs (issue 11, `--verify_top_k`).

Starts a 2-worker local TF server cluster (one core each) and measures its
devices and links (the simulator predicts with the measured figures). For
each graph of --graphs (steps of ~10-100 ms on one core, see
`tfplace.experiments.real_runs.GRAPHS`): --placer searches the simulator for
--budget_s seconds, `verify_top_k` measures its --top_k best distinct
placements and the best heuristic in --rounds interleaved rounds and returns
the measured fastest (after a duel against the best heuristic in fresh
rounds); then the returned placement and the best heuristic are
measured again, alone, in --confirm_rounds fresh interleaved rounds. Prints
the table and, per graph, the target: the returned placement is measured at
least as fast as the best heuristic measured the same way (returned /
heuristic <= 1 + --tolerance, the noise allowed).

Then the real-reward row for each graph of --real_graphs: from the
simulator-only result (the search's best on the simulator) a fine-tune on
measured step times for --real_budget_s seconds (`--real_reward`), and the
fine-tuned placement measured against the simulator-only one and the best
heuristic in --confirm_rounds fresh interleaved rounds: does the fine-tune
improve the measured step time? With --json the last line is one JSON
object.

  python scripts/verify_table.py                      # ~6-8 minutes
  python scripts/verify_table.py --graphs towers2 --budget_s 5 --top_k 3 \
      --real_graphs towers2 --real_budget_s 60
  python scripts/verify_table.py --real_budget_s 600  # the 10-minute row
  python scripts/verify_table.py --graphs towers2 --real_graphs towers2 \
      --real_learned colocrl,hierarchical            # + the learned policies

--real_learned: each learned placer is trained on the simulator for
--budget_s seconds, then its policy fine-tuned on measured step times for
--real_budget_s (`tfplace.real.learned_fine_tune`), and confirmed against
its own simulator-only result and the best heuristic.

Measure it alone on the machine: other load moves step times by more than
the differences between placements.
"""

import dataclasses
import json
import sys
import time

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.cli.app_runner import run_app, start_script

start_script("verify_table")  # Ctrl-C, TF's start-up lines: from here.

from absl import flags

from tfplace.errors import TfplaceError
from tfplace.experiments.real_runs import (GRAPHS, build_graph,
                                           learned_reward_row,
                                           real_reward_row, verify_row)
from tfplace.units import format_seconds

_GRAPHS = flags.DEFINE_list("graphs", list(GRAPHS), f"of {sorted(GRAPHS)}")
_PLACER = flags.DEFINE_string("placer", "local_search", "the search placer")
_BUDGET_S = flags.DEFINE_float("budget_s", 20.0, "seconds of search")
_TOP_K = flags.DEFINE_integer("top_k", 5, "candidates verified")
_ROUNDS = flags.DEFINE_integer("rounds", 3, "verification rounds")
_STEPS = flags.DEFINE_integer("steps", 5, "timed steps per placement and "
                              "round")
_CONFIRM = flags.DEFINE_integer("confirm_rounds", 4, "confirmation rounds")
_TOLERANCE = flags.DEFINE_float("tolerance", 0.03, "noise allowed by the "
                                "target (returned / heuristic <= 1 + this)")
_REAL_GRAPHS = flags.DEFINE_list(
    "real_graphs", ["towers4", "small_cnn"], "graphs (of --graphs) for the "
    "real-reward row (empty: none)")
_REAL_BUDGET_S = flags.DEFINE_float(
    "real_budget_s", 120.0, "real seconds of each fine-tune (<= 600)")
_REAL_ALGORITHM = flags.DEFINE_enum(
    "real_algorithm", "local_search", ["local_search", "cross_entropy"],
    "the search on measured times")
_REAL_CONFIRM = flags.DEFINE_integer(
    "real_confirm_rounds", 2, "--real_graphs: fresh pairs that confirm a "
    "placement measured faster than the search's best so far (0: none)")
_REAL_LEARNED = flags.DEFINE_list(
    "real_learned", [], "learned placers (colocrl, hierarchical) trained on "
    "the simulator for --budget_s, then fine-tuned on measured times, on "
    "each of --real_graphs (empty: none)")
_SEED = flags.DEFINE_integer("seed", 0, "search seed")
_JSON = flags.DEFINE_bool("json", False, "print the rows as JSON last")


def _settings():
  from tfplace.measurement.config import MeasureConfig
  from tfplace.real.verify import VerifySettings
  return VerifySettings(top_k=_TOP_K.value, rounds=_ROUNDS.value,
                        measure=MeasureConfig(warmup=2, steps=_STEPS.value),
                        progress=False)


def _time(x) -> str:
  return "—" if x is None else format_seconds(x)


def _ratio(x) -> str:
  return "—" if x is None else f"{x:.3f}"


def _table(rows) -> str:
  lines = ["| graph | ops | best heuristic: predicted / measured | returned: "
           "predicted / measured | duel ratio | speed-up (verify) | returned ÷ "
           "heuristic (confirm) | Spearman | predicted best = measured best | "
           "target |",
           "|---|---:|---|---|---:|---:|---:|---:|---|---|"]
  for r in rows:
    lines.append(
        f"| {r.graph} | {r.num_ops} | {r.heuristic}: "
        f"{_time(r.heuristic_predicted_s)} / {_time(r.heuristic_measured_s)} "
        f"| {r.returned}: {_time(r.returned_predicted_s)} / "
        f"{_time(r.returned_measured_s)} | {_ratio(r.duel_ratio)} | "
        f"{_ratio(r.verify_speedup)} | "
        f"{_ratio(r.confirm_ratio)} | {_ratio(r.spearman)} | "
        f"{r.predicted_best_is_measured_best} | "
        f"{'met' if r.met else 'NOT met'} |")
  return "\n".join(lines)


def _real_table(rows) -> str:
  lines = ["| graph | budget | took | evaluations | measured | failed | "
           "improvements confirmed (lost) | drift | kept (own duel) | "
           "fine-tuned ÷ simulator-only (confirm) | "
           "fine-tuned ÷ heuristic (confirm) | improved |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|"]
  for r in rows:
    better = r.vs_sim_only is not None and r.vs_sim_only < 1.0
    lines.append(
        f"| {r.graph} | {r.budget_s:g} s | {r.seconds:g} s | {r.evaluations} "
        f"| {r.measured} | {r.failed} | {r.confirmed} ({r.rejected}) | "
        f"{r.drift:.2f}x | "
        f"{'yes' if r.improved else 'no'} ({_ratio(r.duel_ratio)}) | "
        f"{_ratio(r.vs_sim_only)} | {_ratio(r.vs_heuristic)} | "
        f"{'yes' if better else 'no'} |")
  return "\n".join(lines)


def _check_flags() -> None:
  for name, graphs in (("graphs", _GRAPHS.value),
                       ("real_graphs", _REAL_GRAPHS.value)):
    unknown = sorted(set(graphs) - set(GRAPHS))
    if unknown:
      raise TfplaceError(f"unknown {name} {unknown}; choose from "
                         f"{sorted(GRAPHS)}")
  if set(_REAL_GRAPHS.value) - set(_GRAPHS.value):
    raise TfplaceError("--real_graphs must be among --graphs")
  if _REAL_GRAPHS.value:
    _real_settings()  # Raises on a bad budget.
  bad = sorted(set(_REAL_LEARNED.value) - {"colocrl", "hierarchical"})
  if bad:
    raise TfplaceError(f"--real_learned: {bad} cannot be fine-tuned on real "
                       "runs (colocrl, hierarchical)")


def _real_settings():
  from tfplace.real.fine_tune import RealRewardSettings
  from tfplace.real.measured_evaluator import MeasuredSettings
  return RealRewardSettings(
      budget_s=_REAL_BUDGET_S.value, algorithm=_REAL_ALGORITHM.value,
      progress=False,
      measured=MeasuredSettings(confirm_rounds=_REAL_CONFIRM.value))


def main(argv):
  del argv
  _check_flags()
  settings, rows, real_rows = _settings(), [], []
  t0 = time.perf_counter()
  options = {"budget_s": _BUDGET_S.value, "progress": False}
  with tfplace.LocalCluster(num_workers=2, benchmark=True) as servers:
    cluster = servers.to_cluster()
    for name in _GRAPHS.value:
      graph = build_graph(name)
      row, verified = verify_row(graph, servers, cluster, _PLACER.value,
                                 options, settings, _CONFIRM.value,
                                 _TOLERANCE.value, _SEED.value)
      rows.append(row)
      print(f"verified {name} ({time.perf_counter() - t0:.0f} s)", flush=True)
      if name in _REAL_GRAPHS.value:
        real_rows += _real_rows(graph, servers, cluster, verified, settings)
        print(f"fine-tuned {name} ({time.perf_counter() - t0:.0f} s)",
              flush=True)
  _print(rows, real_rows)


def _real_rows(graph, servers, cluster, verified, settings) -> list:
  """The search placer's fine-tune, then each --real_learned placer's."""
  import tempfile
  rows = [real_reward_row(graph, servers, cluster, verified, _real_settings(),
                          _CONFIRM.value, settings.measure, _SEED.value)]
  heuristic = verified.candidates[verified.report.reference]
  for name in _REAL_LEARNED.value:
    with tempfile.TemporaryDirectory(prefix="verify_table_") as logdir:
      rows.append(learned_reward_row(
          graph, servers, cluster, name, _BUDGET_S.value, _real_settings(),
          _CONFIRM.value, settings.measure, heuristic, logdir, _SEED.value))
  return rows


def _print(rows, real_rows) -> None:
  print(_table(rows))
  met = sum(r.met for r in rows)
  print(f"target (returned measured at least as fast as the best heuristic, "
        f"tolerance {_TOLERANCE.value:.0%}): met on {met}/{len(rows)} graphs")
  if real_rows:
    print(_real_table(real_rows))
    better = sum(r.vs_sim_only is not None and r.vs_sim_only < 1.0
                 for r in real_rows)
    print(f"real reward: the fine-tune improved the measured step time over "
          f"the simulator-only result on {better}/{len(real_rows)} rows")
  if _JSON.value:
    print(json.dumps({
        "rows": [dict(dataclasses.asdict(r), met=r.met) for r in rows],
        "real_reward": [dataclasses.asdict(r) for r in real_rows]}))


if __name__ == "__main__":
  run_app(main, sys.argv, "verify_table")
