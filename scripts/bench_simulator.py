"""Benchmark: simulator evaluations per second on one core.

Targets: >= 100 evaluations/s on an ~11.4K-op graph (Inception-V3 training
step) and >= 2,000/s on a 500-op graph. Uses the real Inception-V3 graph
(`tfplace.models.registry.build_model("inception_v3")`) when it can be built,
else a synthetic layered DAG of the same size. Placements are uniformly
random per colocation group over the cluster's devices (near the worst case
for transfers).

  python scripts/bench_simulator.py --cluster k80x4 --batch 64 --repeats 5
"""

import sys
import time

import tfplace  # noqa: F401  (before TF)
from tfplace import interrupts

interrupts.install("bench_simulator")  # Ctrl-C during the imports ends cleanly.

import numpy as np
from absl import flags, logging

from tfplace.cli.app_runner import run_app
from tfplace.cost.analytical import AnalyticalCostModel
from tfplace.cost.op_costs import OpCosts
from tfplace.cost.presets import load_cluster
from tfplace.simulator.simulator import Simulator
from tfplace.graph.op_graph import Edge, Op, OpGraph

FLAGS = flags.FLAGS
flags.DEFINE_string("cluster", "k80x4", "cluster preset or JSON file")
flags.DEFINE_integer("batch", 64, "placements per simulate_batch call")
flags.DEFINE_integer("repeats", 5, "timed runs per case (median reported)")
flags.DEFINE_bool("real", True, "use the real Inception-V3 graph if available")
flags.DEFINE_integer("seed", 0, "random seed")


def layered_graph(num_ops: int, width: int, seed: int) -> OpGraph:
  """A synthetic training-step-like DAG: layers of `width` ops, each reading
  1-3 ops of the previous two layers, ~1 MB tensors, ~0.1-1 GFLOP per op."""
  rng = np.random.default_rng(seed)
  ops, edges = [], []
  for i in range(num_ops):
    nbytes = int(rng.integers(1 << 16, 1 << 21))
    ops.append(Op(name=f"op{i}", type="Conv2D", output_shapes=((nbytes // 4,),),
                  output_dtypes=("float32",), output_bytes=(nbytes,),
                  param_bytes=int(rng.integers(0, 1 << 20)),
                  flops=float(rng.uniform(1e8, 1e9))))
    layer = i // width
    if layer == 0:
      continue
    lo = max(0, (layer - 2) * width)
    for src in set(rng.integers(lo, layer * width, size=rng.integers(1, 4))):
      edges.append(Edge(int(src), i, 0, ops[int(src)].output_bytes[0]))
  return OpGraph(ops, edges, graph_def=None, name=f"layered{num_ops}")


def _inception_graph():
  try:
    from tfplace.models.registry import build_model
    graph = build_model("inception_v3")
    return graph if isinstance(graph, OpGraph) else None
  except Exception as e:  # pylint: disable=broad-except
    logging.warning("real Inception-V3 unavailable (%s); using synthetic", e)
    return None


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


def bench(graph: OpGraph, costs: OpCosts, cluster, batch: int, repeats: int,
          seed: int):
  """Returns (median batched evals/s, median single-call evals/s, feasible
  fraction)."""
  sim = Simulator(graph, cluster, costs)
  ids = random_placements(graph, costs, cluster.num_devices, batch, seed)
  steps = sim.simulate_batch(ids[:2])  # compile / load the cache
  sim.simulate(ids[0])
  batched, single = [], []
  for _ in range(repeats):
    t0 = time.perf_counter()
    steps = sim.simulate_batch(ids)
    batched.append(batch / (time.perf_counter() - t0))
    n = max(1, batch // 4)
    t0 = time.perf_counter()
    for row in ids[:n]:
      sim.simulate(row)
    single.append(n / (time.perf_counter() - t0))
  return (float(np.median(batched)), float(np.median(single)),
          float(np.mean(np.isfinite(steps))))


def main(argv):
  del argv
  cluster = load_cluster(FLAGS.cluster)
  model = AnalyticalCostModel()
  big = _inception_graph() if FLAGS.real else None
  cases = [("inception_v3" if big else "synthetic 11.4K", 100.0,
            big or layered_graph(11400, 60, FLAGS.seed)),
           ("synthetic 500", 2000.0, layered_graph(500, 20, FLAGS.seed))]
  print(f"cluster {cluster.name} ({cluster.num_devices} devices), batch "
        f"{FLAGS.batch}, median of {FLAGS.repeats}")
  for name, target, graph in cases:
    costs = model.op_costs(graph, cluster)
    rate, single, feasible = bench(graph, costs, cluster, FLAGS.batch,
                                   FLAGS.repeats, FLAGS.seed)
    status = "OK" if rate >= target else "BELOW TARGET"
    print(f"{name:>16}: {graph.num_ops:6d} ops, {len(graph.edges):6d} edges: "
          f"{rate:9.1f} evals/s batched, {single:9.1f} evals/s single call "
          f"(target {target:.0f}/s: {status}); feasible {feasible:.0%}")


if __name__ == "__main__":
  run_app(main, sys.argv, "bench_simulator")
