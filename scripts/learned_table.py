"""The learned placers against every heuristic and against local search.

For each graph and cluster: every heuristic placer (the best one is the
learned placers' start), then each learned configuration (placer x agent x
reward shaping x seed) with a wall-time budget, then local search from the
same start with the same number of simulator evaluations as each learned
run. Prints one row per run (best step time, x lower bound, vs the best
heuristic, speed-up over the expert, samples, evaluations, wall time,
samples/s) and a
summary (median over seeds), and writes table.md and table.json (atomically)
to --out_dir, with each learned run's TensorBoard curves under
--out_dir/logs/.

  python scripts/learned_table.py --models nmt --clusters k80x4 \\
      --placers colocrl --agents reinforce,ppo --seeds 0,1,2 --budget_s 300
  python scripts/learned_table.py --quick --budget_s 30   # small sizes
  python scripts/learned_table.py --models mlp_towers:num_towers=8 \
      --clusters k80x4      # a graph no heuristic was tuned on

Local search is the `local_search` placer (its default: a first stage
over units, then the colocation groups) with its max_evaluations set to
the learned run's evaluations; for the placers over ColocRL's units
(colocrl, gdp, mars, placeto) a second row, "local_search (units)", runs it
over those same units (`coarsen_method=start_chunks`): the same action space
and the same evaluations as the learned run.

"vs best heuristic" is the cut in step time, 1 - t / t_best. "speed-up over
the expert" is ColocRL's Speedup column (Mirhoseini et al., 2017, Table 1):
t_expert / t - 1, e.g. NMT on 4 GPUs 4.73 s / 3.92 s - 1 = 20.6 %; the cut in
step time, 1 - t / t_expert, is printed beside it.
"""

import itertools
import json
import math
import os
import statistics
import sys
import time

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.cli.app_runner import run_app, start_script

start_script("learned_table")  # Ctrl-C, TF's start-up lines: from here.

from absl import flags  # noqa: E402

from tfplace.errors import TfplaceError  # noqa: E402
from tfplace.io_utils import atomic_write  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_list("models", ["rnnlm", "nmt", "inception_v3"],
                  "models: NAME or NAME:field=value:... (e.g. "
                  "mlp_towers:num_towers=8), or synthetic.KIND[:seed=N]")
flags.DEFINE_list("clusters", ["k80x2", "k80x4"], "cluster presets")
flags.DEFINE_list("placers", ["colocrl", "hierarchical"], "learned placers")
flags.DEFINE_list("agents", ["reinforce"], "agents: reinforce, ppo")
flags.DEFINE_list("rewards", ["relative"], "reward shapings")
flags.DEFINE_list("seeds", ["0", "1", "2"], "seeds")
flags.DEFINE_float("budget_s", 300.0, "wall-time budget of each search")
flags.DEFINE_string("placer_options", "", "more learned-placer options, k=v,..")
flags.DEFINE_bool("local_search", True, "compare with local search")
flags.DEFINE_bool("unit_search", True,
                  "for placers over ColocRL's units (colocrl, gdp, mars, "
                  "placeto): also compare with local search over the same "
                  "units (coarsen_method=start_chunks), at equal evaluations")
flags.DEFINE_bool("quick", False, "reduced model sizes")
flags.DEFINE_string("out_dir", "out/learned", "where tables and logs go")


def _graph(spec: str):
  """A model by spec: "name" or "name:field=value:..." (registry models), or
  "synthetic.KIND[:field=value...]" (`tfplace.models.synthetic`, if there)."""
  from tfplace.experiments.seed_table import QUICK_OVERRIDES, parse_overrides
  from tfplace.models.registry import build_model
  name, *fields = spec.split(":")
  overrides = parse_overrides(name, fields)
  if name.startswith("synthetic."):
    from tfplace.models import synthetic  # pylint: disable=g-import-not-at-top
    return synthetic.build_synthetic(name.split(".", 1)[1], **overrides)
  if FLAGS.quick:
    overrides = {**QUICK_OVERRIDES.get(name, {}), **overrides}
  return build_model(name, **overrides)


def _problem(model: str, cluster: str):
  from tfplace.cost.presets import load_cluster
  from tfplace.placers.problem import PlacementProblem
  return PlacementProblem.build(_graph(model), load_cluster(cluster))


def _heuristics(problem):
  """{name: (step time, seconds)} for every heuristic placer."""
  from tfplace.pipeline import run_placer
  from tfplace.placers.base import PlacerKind
  from tfplace.placers.registry import get_placer, list_placers
  out = {}
  for name in list_placers(PlacerKind.HEURISTIC):
    t = time.perf_counter()
    try:
      out[name] = (run_placer(problem, get_placer(name)).step_time_s,
                   time.perf_counter() - t)
    except TfplaceError as e:
      print(f"  {name} failed: {e}", file=sys.stderr)
  return out


def _learned(problem, placer, agent, reward, seed, start, logdir):
  from tfplace.pipeline import run_placer
  from tfplace.placers.options import parse_option_text
  from tfplace.placers.registry import get_placer
  options = {"agent": agent, "reward": reward, "budget_s": FLAGS.budget_s,
             "init": start, "logdir": logdir, "restart": True,
             "progress": False}
  options.update(parse_option_text(FLAGS.placer_options))
  t = time.perf_counter()
  run = run_placer(problem, get_placer(placer, options), seed=seed)
  search = dict(run.placement.metadata.extra["search"])
  search["placer_s"] = time.perf_counter() - t
  return run.step_time_s, search


def _local_searches(placer):
  """(label, extra local_search options) of each comparison of `placer`."""
  from tfplace.placers.registry import get_placer
  from tfplace.placers.options import parse_option_text
  out = [("local_search", {})] if FLAGS.local_search else []
  options = get_placer(placer, parse_option_text(FLAGS.placer_options)).options
  if FLAGS.unit_search and hasattr(options, "num_chunks"):
    out.append(("local_search (units)", {"coarsen_k": options.num_chunks,
                                         "coarsen_method": "start_chunks"}))
  return out


def _local_search(problem, start, evaluations, seed, extra):
  from tfplace.pipeline import run_placer
  from tfplace.placers.registry import get_placer
  t = time.time()
  run = run_placer(problem, get_placer("local_search", {
      "budget_s": 3600.0, "max_evaluations": int(evaluations),
      "init": start.source.split(" ")[0], "progress": False, **extra}),
                   seed=seed)
  return run.step_time_s, time.time() - t


def _vs_expert(t, expert):
  """ColocRL's speed-up over the expert, and the cut in step time."""
  return f"{100 * (expert / t - 1):.1f} % ({100 * (1 - t / expert):.1f} %)"


def _row(cells):
  return "| " + " | ".join(str(c) for c in cells) + " |"


def _run_case(model, cluster, records, lines):
  from tfplace.placers.search_support import start_placement
  problem = _problem(model, cluster)
  lb = problem.lower_bound_s
  heuristics = _heuristics(problem)
  start = start_placement(problem, "best_heuristic")
  best_h = min(heuristics.values())[0]
  expert = heuristics.get("expert", (math.nan,))[0]
  for name, (t, s) in sorted(heuristics.items(), key=lambda kv: kv[1][0]):
    records.append({"model": model, "cluster": cluster, "method": name,
                    "step_time_s": t, "placer_s": s, "lower_bound_s": lb})
  lines.append(_row([model, cluster, f"best heuristic ({start.source})", "",
                     "", f"{best_h:.4f}", f"{best_h / lb:.2f}", "0.0 %",
                     _vs_expert(best_h, expert), "", "", "", ""]))
  for placer, agent, reward, seed in itertools.product(
      FLAGS.placers, FLAGS.agents, FLAGS.rewards, FLAGS.seeds):
    logdir = os.path.join(FLAGS.out_dir, "logs", f"{model}_{cluster}_{placer}"
                          f"_{agent}_{reward}_s{seed}")
    t, search = _learned(problem, placer, agent, reward, int(seed),
                         start.source.split(" ")[0], logdir)
    records.append({"model": model, "cluster": cluster, "method": placer,
                    "agent": agent, "reward": reward, "seed": int(seed),
                    "step_time_s": t, "lower_bound_s": lb, **search})
    lines.append(_row([
        model, cluster, placer, agent, f"{reward} s{seed}", f"{t:.4f}",
        f"{t / lb:.2f}", f"{100 * (1 - t / best_h):.1f} %",
        _vs_expert(t, expert), search["samples"],
        search["evaluations"], f"{search['placer_s']:.0f}",
        f"{search['samples_per_s']:.0f}"]))
    print(lines[-1])
    for how, extra in _local_searches(placer):
      lt, ls = _local_search(problem, start, search["evaluations"], int(seed),
                             extra)
      records.append({"model": model, "cluster": cluster, "method": how,
                      "seed": int(seed), "step_time_s": lt,
                      "evaluations": search["evaluations"], "placer_s": ls,
                      "lower_bound_s": lb})
      lines.append(_row([
          model, cluster, how, "", f"s{seed}", f"{lt:.4f}", f"{lt / lb:.2f}",
          f"{100 * (1 - lt / best_h):.1f} %",
          _vs_expert(lt, expert), "", search["evaluations"],
          f"{ls:.0f}", ""]))
      print(lines[-1])
    sys.stdout.flush()


def _summary(records):
  """Median best step time per (model, cluster, method, agent, reward)."""
  groups = {}
  for r in records:
    if "seed" not in r:
      continue
    key = (r["model"], r["cluster"], r["method"], r.get("agent", ""),
           r.get("reward", ""))
    groups.setdefault(key, []).append(r["step_time_s"])
  lines = ["| graph | cluster | method | agent | reward | median step time "
           "(s) | min | max | seeds |", "|---|---|---|---|---|---|---|---|---|"]
  for key, times in sorted(groups.items()):
    lines.append(_row(list(key) + [f"{statistics.median(times):.4f}",
                                   f"{min(times):.4f}", f"{max(times):.4f}",
                                   len(times)]))
  return lines


def main(argv):
  del argv
  head = ["graph", "cluster", "method", "agent", "reward / seed",
          "step time (s)", "x LB", "vs best heuristic",
          "speed-up over expert (step cut)",
          "samples", "evaluations", "wall s", "samples/s"]
  lines = [_row(head), _row(["---"] * len(head))]
  print("\n".join(lines))
  records = []
  for model, cluster in itertools.product(FLAGS.models, FLAGS.clusters):
    _run_case(model, cluster, records, lines)
  summary = _summary(records)
  print("\n" + "\n".join(summary))
  text = "\n".join(lines + [""] + summary) + "\n"
  atomic_write(os.path.join(FLAGS.out_dir, "table.md"), text)
  atomic_write(os.path.join(FLAGS.out_dir, "table.json"),
               json.dumps(records, indent=1, default=str))
  return 0


if __name__ == "__main__":
  run_app(main, sys.argv, "learned_table")
