"""Benchmark: simulator evaluations per second, per core and in parallel.

Targets: >= 500 evaluations/s per core on Inception-V3 (11,282 ops, the
training step; issue 9) and >= 2,000/s on a 500-op graph. Placements are
uniformly random per colocation group over the cluster's devices (near the
worst case for transfers). For each graph it prints:
  * batched: `simulate_batch` on one thread, evaluations per second of wall
    time and per second of the thread's CPU time (the CPU figure is what one
    core does; on a loaded machine the wall figure is lower);
  * single call: `simulate` one placement at a time;
  * parallel: `simulate_batch(num_threads=N)`, total and per thread;
  * whether every step time equals the one the kernel computed before the
    throughput work (`testdata/simulator/bench_reference.json`, same seeds).

  taskset -c 1 python scripts/bench_simulator.py --cluster k80x4
  python scripts/bench_simulator.py --threads 2
"""

import json
import os
import sys
import time

import tfplace  # noqa: F401  (before TF)
from tfplace.cli.app_runner import run_app, start_script

start_script("bench_simulator")  # Ctrl-C, TF's start-up lines: from here.

import numpy as np
from absl import flags, logging

from tfplace.cost.analytical import AnalyticalCostModel
from tfplace.cost.op_costs import OpCosts
from tfplace.cost.presets import load_cluster
from tfplace.graph.op_graph import OpGraph
from tfplace.models.synthetic import layered_dag
from tfplace.simulator.simulator import Simulator

FLAGS = flags.FLAGS
flags.DEFINE_string("cluster", "k80x4", "cluster preset or JSON file")
flags.DEFINE_integer("batch", 64, "placements per simulate_batch call")
flags.DEFINE_integer("repeats", 5, "timed runs per case (median reported)")
flags.DEFINE_integer("threads", os.cpu_count() or 1,
                     "threads for the parallel figure")
flags.DEFINE_bool("real", True, "use the real Inception-V3 graph if available")
flags.DEFINE_integer("seed", 0, "random seed")

_REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                          "testdata", "simulator", "bench_reference.json")


def random_placements(graph: OpGraph, costs: OpCosts, num_devices: int,
                      batch: int, seed: int) -> np.ndarray:
  """int32 [batch, M]: a uniformly random device per colocation group (an op
  without a kernel there goes to the first device that has one)."""
  rng = np.random.default_rng(seed)
  groups = rng.integers(0, num_devices,
                        size=(batch, graph.num_colocation_groups))
  ids = groups[:, graph.group_of].astype(np.int32)
  kernels = np.isfinite(costs.compute_s)
  return np.where(kernels[np.arange(graph.num_ops), ids], ids,
                  np.argmax(kernels, axis=1)[None, :]).astype(np.int32)


def _inception_graph():
  try:
    from tfplace.models.registry import build_model
    return build_model("inception_v3")
  except Exception as e:  # pylint: disable=broad-except
    logging.warning("real Inception-V3 unavailable (%s); using synthetic", e)
    return None


def _rates(fn, count: int, repeats: int):
  """Median evaluations per second of wall time and of thread CPU time."""
  wall, cpu = [], []
  for _ in range(repeats):
    w0, c0 = time.perf_counter(), time.thread_time()
    fn()
    wall.append(count / (time.perf_counter() - w0))
    cpu.append(count / max(time.thread_time() - c0, 1e-9))
  return float(np.median(wall)), float(np.median(cpu))


def bench(sim: Simulator, ids: np.ndarray, repeats: int, threads: int) -> dict:
  """Evaluations per second of `sim` on the placements `ids`."""
  sim.simulate_batch(ids[:2])  # Compile or load the numba cache.
  sim.simulate(ids[0])
  sim.simulate_batch(ids[:2], num_threads=threads)
  batched = _rates(lambda: sim.simulate_batch(ids), len(ids), repeats)
  few = ids[:max(1, len(ids) // 4)]
  single = _rates(lambda: [sim.simulate(row) for row in few], len(few),
                  repeats)
  parallel, _ = _rates(lambda: sim.simulate_batch(ids, num_threads=threads),
                       len(ids), repeats)
  return dict(batched=batched, single=single, parallel=parallel)


def _reference_check(key: str, steps: np.ndarray) -> str:
  with open(_REFERENCE) as f:
    reference = json.load(f)
  if key not in reference:
    return "no reference for these settings"
  expected = np.array([float(x) for x in reference[key]])
  if len(expected) != len(steps):
    return "no reference for this batch size"
  same = int(np.sum((expected == steps) | (np.isinf(expected)
                                           & np.isinf(steps))))
  return (f"bit-identical to the kernel before the speedups: "
          f"{'yes' if same == len(steps) else 'NO'} ({same}/{len(steps)})")


def main(argv):
  del argv
  cluster = load_cluster(FLAGS.cluster)
  model = AnalyticalCostModel()
  big = _inception_graph() if FLAGS.real else None
  cases = [("inception_v3" if big else "synthetic 11.4K", 500.0,
            big or layered_dag(11400, 60, FLAGS.seed)),
           ("synthetic 500", 2000.0, layered_dag(500, 20, FLAGS.seed))]
  print(f"cluster {cluster.name} ({cluster.num_devices} devices), batch "
        f"{FLAGS.batch}, median of {FLAGS.repeats}, {FLAGS.threads} threads "
        "for the parallel figure")
  for name, target, graph in cases:
    costs = model.op_costs(graph, cluster)
    sim = Simulator(graph, cluster, costs)
    ids = random_placements(graph, costs, cluster.num_devices, FLAGS.batch,
                            FLAGS.seed)
    r = bench(sim, ids, FLAGS.repeats, FLAGS.threads)
    status = "OK" if r["batched"][1] >= target else "BELOW TARGET"
    print(f"{name}: {graph.num_ops} ops, {len(graph.edges)} edges\n"
          f"  batched     {r['batched'][0]:9.1f} evals/s wall, "
          f"{r['batched'][1]:9.1f} per CPU-second "
          f"(target {target:.0f}/s per core: {status})\n"
          f"  single call {r['single'][0]:9.1f} evals/s wall, "
          f"{r['single'][1]:9.1f} per CPU-second\n"
          f"  parallel    {r['parallel']:9.1f} evals/s wall with "
          f"{FLAGS.threads} threads ({r['parallel'] / FLAGS.threads:.1f} per "
          "thread)")
    key = f"{name}/{cluster.name}/seed{FLAGS.seed}/batch{FLAGS.batch}"
    print("  " + _reference_check(key, sim.simulate_batch(ids)))


if __name__ == "__main__":
  run_app(main, sys.argv, "bench_simulator")
