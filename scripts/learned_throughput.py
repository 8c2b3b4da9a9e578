"""Samples per second of the learned placers, part by part.

For each configuration: policy calls per second (one call samples
--batch_size placements), simulator evaluations per second (one
`simulate_batch` of the batch), train steps per second, and the whole loop's
samples per second. Measured after one warm-up batch (tf.function tracing and
numba compilation are reported separately as setup time).

  python scripts/learned_throughput.py --model inception_v3 --cluster k80x4
  python scripts/learned_throughput.py --configs colocrl:64,gdp:64,hierarchical

Configurations: "colocrl:K" (ColocRL over K topological chunks split by the
start placement's devices; "colocrl:all" places every colocation group as its
own unit), "gdp:K" and "mars:K" (GDP, Mars over the same units; ":all"
likewise; Mars without its pre-training, which runs once before a search) and
"hierarchical" (the grouper over every colocation group).
"""

import dataclasses
import sys
import time

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.cli.app_runner import run_app, start_script

start_script("learned_throughput")  # Ctrl-C, TF's start-up lines: from here.

from absl import flags  # noqa: E402


FLAGS = flags.FLAGS
flags.DEFINE_string("model", "inception_v3", "benchmark model")
flags.DEFINE_string("cluster", "k80x4", "cluster preset")
flags.DEFINE_list("configs", ["colocrl:64", "colocrl:all", "gdp:64",
                                "hierarchical"],
                  "configurations (see the module docstring)")
flags.DEFINE_list("batch_sizes", ["32", "64"], "placements per policy call")
flags.DEFINE_list("agents", ["reinforce", "ppo"], "agents")
flags.DEFINE_integer("steps", 8, "timed batches per configuration")
flags.DEFINE_string("init", "m_etf", "start placement (placer name)")


def _setup(problem, start, config: str, batch_size: int, agent: str):
  from tfplace.rl import builders
  kind, _, arg = config.partition(":")
  env = builders.EnvConfig(batch_size=batch_size,
                           shared_logits=agent != "ppo")
  setups = {"colocrl": builders.colocrl_setup, "gdp": builders.gdp_setup,
            "mars": builders.mars_setup}
  if kind in setups:
    chunks = problem.groups.num_groups if arg == "all" else int(arg or 64)
    env = dataclasses.replace(env, num_chunks=chunks)
    return setups[kind](problem, start.group_devices, start.step_time_s, env)
  return builders.hierarchical_setup(problem, start.group_devices,
                                     start.step_time_s, env)


def _time_parts(loop, steps: int):
  """Seconds per batch: policy call, simulation, train step; and the loop."""
  from tfplace.rl import experience
  parts = {"policy": 0.0, "simulate": 0.0, "train": 0.0}
  env = loop.env
  for _ in range(steps):
    time_step = env.reset()
    t0 = time.perf_counter()
    action_step = loop.policy.action(time_step)
    t1 = time.perf_counter()
    next_step = env.step(action_step.action)
    t2 = time.perf_counter()
    loop.train(experience.one_step_episodes(time_step, action_step, next_step))
    t3 = time.perf_counter()
    parts["policy"] += t1 - t0
    parts["simulate"] += t2 - t1
    parts["train"] += t3 - t2
  t = time.perf_counter()
  for _ in range(steps):
    loop.step()
  whole = (time.perf_counter() - t) / steps
  return {k: v / steps for k, v in parts.items()}, whole


def main(argv):
  del argv
  from tfplace.cost.presets import load_cluster
  from tfplace.models.registry import build_model
  from tfplace.placers.problem import PlacementProblem
  from tfplace.placers.search_support import start_placement
  from tfplace.rl.agents import AgentConfig
  from tfplace.rl.search import SearchConfig
  from tfplace.rl.search_loop import SearchLoop
  problem = PlacementProblem.build(build_model(FLAGS.model),
                                   load_cluster(FLAGS.cluster))
  start = start_placement(problem, FLAGS.init)
  print(f"{FLAGS.model} on {FLAGS.cluster}: {problem.graph.num_ops} ops, "
        f"{problem.groups.num_groups} colocation groups; start "
        f"{start.source} {start.step_time_s:.4f} s")
  print("| config | agent | B | units | setup s | policy calls/s | "
        "sim evals/s | train steps/s | loop samples/s |")
  print("|---|---|---|---|---|---|---|---|---|")
  for config in FLAGS.configs:
    for agent in FLAGS.agents:
      for b in (int(x) for x in FLAGS.batch_sizes):
        t = time.perf_counter()
        setup = _setup(problem, start, config, b, agent)
        loop = SearchLoop(setup, AgentConfig(kind=agent),
                          SearchConfig(progress=False))
        loop.compile()  # The compiled steps' rate (searches compile late).
        loop.start()
        loop.step()
        setup_s = time.perf_counter() - t
        parts, whole = _time_parts(loop, FLAGS.steps)
        print(f"| {config} | {agent} | {b} | {setup.env.codec.num_units} | "
              f"{setup_s:.1f} | {1 / parts['policy']:.2f} | "
              f"{b / parts['simulate']:.0f} | {1 / parts['train']:.2f} | "
              f"{b / whole:.0f} |")
        sys.stdout.flush()
  return 0


if __name__ == "__main__":
  run_app(main, sys.argv, "learned_throughput")
