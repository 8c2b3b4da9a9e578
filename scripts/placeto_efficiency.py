"""Sample efficiency of Placeto against ColocRL and the hierarchical planner.

For each graph and method, one learned search on the same simulator, the
same cluster and the same start placement, under the same budget. After each
train step the script records the placements simulated so far
(evaluations), the episodes (complete placements the policy proposed: one
per one-shot sample, one per Placeto episode) and the best step time seen
among the placements the search itself sampled (the start placement is not
counted, so a method that never beats it shows inf). It prints, per method:

  * final: the best step time at the end of the budget;
  * to 5 %: the evaluations and episodes it took to first come within 5 %
    of that final step time (Placeto's claim: 6.1x fewer training steps
    than the RNN placers, Addanki et al., NeurIPS 2019), and to come within
    5 % of the best final step time of all methods (a common target: a
    method that stalls early is quick to reach its own final);
  * the episodes per second of the whole loop.

Each method runs with its placer's own agent defaults (learning rate,
baseline: `Placer.agent_config`).

Placeto and ColocRL place the same units (ColocRL's topological chunks split
by the start placement's devices, `--num_chunks`); the hierarchical planner
groups the colocation groups itself. By default every method starts from the
single-GPU placement with a uniform policy (`--warm_start baseline`), so
that there is something to learn; `--init m_etf --warm_start imitation` is
the placers' default use (search around the best heuristic).

  python scripts/placeto_efficiency.py --models mlp_towers,inception_v3 \
      --budget_s 300 --json out.json
"""

import dataclasses
import json
import sys
import time

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.cli.app_runner import run_app, start_script

start_script("placeto_efficiency")  # Ctrl-C, TF's start-up lines: from here.

from absl import flags


FLAGS = flags.FLAGS
flags.DEFINE_list("models", ["mlp_towers", "rnnlm", "inception_v3"],
                  "benchmark models")
flags.DEFINE_string("cluster", "k80x4", "cluster preset")
flags.DEFINE_list("methods", ["colocrl", "hierarchical", "placeto"],
                  "learned placers to compare")
flags.DEFINE_string("agent", "reinforce", "reinforce or ppo (all methods)")
flags.DEFINE_float("budget_s", 240.0, "wall-time budget per search (s)")
flags.DEFINE_integer("max_samples", 200_000, "sample budget per search")
flags.DEFINE_string("init", "single_gpu", "start placement (placer name)")
flags.DEFINE_enum("warm_start", "baseline", ["baseline", "imitation"],
                  "warm start of every method")
flags.DEFINE_integer("num_chunks", 64, "ColocRL/Placeto topological chunks")
flags.DEFINE_integer("batch_size", 16, "placements (episodes) per batch")
flags.DEFINE_string("reward_mode", "intermediate", "Placeto's reward mode")
flags.DEFINE_integer("seed", 0, "random seed")
flags.DEFINE_string("json", None, "also write the rows and curves here")


@dataclasses.dataclass(frozen=True)
class Point:
  """The search after one train step."""
  evaluations: int
  episodes: int
  wall_s: float
  best_s: float


def _setup(method: str, problem, start):
  from tfplace.rl import builders
  from tfplace.rl.placeto_builder import ProgressiveConfig, placeto_setup
  b, chunks = FLAGS.batch_size, FLAGS.num_chunks
  if method == "placeto":
    config = ProgressiveConfig(batch_size=b, num_chunks=chunks,
                               reward_mode=FLAGS.reward_mode)
    return placeto_setup(problem, start.group_devices, start.step_time_s,
                         config)
  shared = FLAGS.agent != "ppo"
  config = builders.EnvConfig(batch_size=b, num_chunks=chunks,
                              shared_logits=shared)
  make = (builders.colocrl_setup if method == "colocrl" else
          builders.hierarchical_setup)
  return make(problem, start.group_devices, start.step_time_s, config)


def _agent(method: str):
  """The placer's own agent defaults (learning rate, baseline)."""
  from tfplace.placers.registry import get_placer
  return get_placer(method, {"agent": FLAGS.agent}).agent_config()


def _search(method: str, problem, start):
  """Runs one search; returns its points."""
  import numpy as np
  from tfplace.rl.search import SearchConfig
  from tfplace.rl.search_loop import SearchLoop
  setup = _setup(method, problem, start)
  config = SearchConfig(budget_s=FLAGS.budget_s, max_samples=FLAGS.max_samples,
                        warm_start=FLAGS.warm_start, progress=False)
  loop = (setup.loop_class or SearchLoop)(setup, _agent(method), config)
  loop.start()
  best, points, t0 = np.inf, [], time.time()
  offer = loop.keep_best

  def keep_best(devices, step_times, actions=None):
    nonlocal best
    best = min(best, float(np.min(step_times)))
    offer(devices, step_times, actions)

  loop.keep_best = keep_best
  while (time.time() - t0 < FLAGS.budget_s and
         loop.samples < FLAGS.max_samples):
    loop.step()
    points.append(Point(int(loop.state.evaluations.numpy()),
                        FLAGS.batch_size * (len(points) + 1),
                        time.time() - t0, best))
  return points


def _to_within(points, fraction: float = 0.05):
  final = points[-1].best_s
  for p in points:
    if p.best_s <= final * (1 + fraction):
      return final, p
  return final, points[-1]


def _to_target(points, target_s: float):
  """The first point at or below `target_s`, else None."""
  return next((p for p in points if p.best_s <= target_s), None)


def _row(model: str, method: str, points, best_of_all_s: float) -> dict:
  final, hit = _to_within(points)
  common = _to_target(points, best_of_all_s * 1.05)
  last = points[-1]
  return {"model": model, "method": method, "agent": FLAGS.agent,
          "final_ms": final * 1e3, "evaluations_to_5pct": hit.evaluations,
          "episodes_to_5pct": hit.episodes,
          "episodes_to_5pct_of_best": common.episodes if common else None,
          "evaluations_to_5pct_of_best": (common.evaluations if common
                                          else None),
          "evaluations": last.evaluations, "episodes": last.episodes,
          "episodes_per_s": last.episodes / max(last.wall_s, 1e-9)}


def _print_rows(rows) -> None:
  for row in rows:
    common = (f"{row['evaluations_to_5pct_of_best']} / "
              f"{row['episodes_to_5pct_of_best']}"
              if row["episodes_to_5pct_of_best"] is not None else "never")
    print(f"| {row['model']} | {row['method']} | {row['final_ms']:.3f} | "
          f"{row['evaluations_to_5pct']} / {row['episodes_to_5pct']} | "
          f"{common} | {row['evaluations']} / {row['episodes']} | "
          f"{row['episodes_per_s']:.1f} |")
  sys.stdout.flush()


def main(argv):
  del argv
  from tfplace.io_utils import check_out_path
  if FLAGS.json:
    check_out_path(FLAGS.json, "--json")
  import tensorflow as tf
  from tfplace.cost.presets import load_cluster
  from tfplace.models.registry import build_model
  from tfplace.placers.problem import PlacementProblem
  from tfplace.placers.search_support import start_placement
  rows, curves = [], {}
  print("| model | method | final ms | to 5 % of own final: evals / "
        "episodes | to 5 % of best final | total evals / episodes | "
        "episodes/s |")
  print("|---|---|---|---|---|---|---|")
  for model in FLAGS.models:
    problem = PlacementProblem.build(build_model(model),
                                     load_cluster(FLAGS.cluster))
    start = start_placement(problem, FLAGS.init)
    runs = {}
    for method in FLAGS.methods:
      tf.random.set_seed(FLAGS.seed)
      runs[method] = _search(method, problem, start)
      curves[f"{model}/{method}"] = [dataclasses.asdict(p)
                                     for p in runs[method]]
    best = min(points[-1].best_s for points in runs.values())
    model_rows = [_row(model, m, points, best) for m, points in runs.items()]
    _print_rows(model_rows)
    rows += model_rows
    print(f"<!-- {model}: start {FLAGS.init} {start.step_time_s * 1e3:.3f} "
          f"ms -->")
  if FLAGS.json:
    from tfplace.io_utils import atomic_write
    atomic_write(FLAGS.json, json.dumps(
        {"start": FLAGS.init, "rows": rows, "curves": curves}, indent=1))
  return 0


if __name__ == "__main__":
  run_app(main, sys.argv, "placeto_efficiency")
