"""The simulator's results may not move when its kernel gets faster.

`testdata/simulator/kernel_expected.json` holds step times, busy times, peak
memory and bytes moved computed by the kernel as it was before the
throughput work (commit 121eed5), for seeded random placements of small
graphs on several clusters: the colocation-group graph `mlp_2tower`, a
layered DAG with an initialization subgraph (ops outside the training step)
and a CPU-only op (placed on a GPU in one placement per case),
the same with zero-cost ops inside the step, a tight-memory cluster (some
placements out of memory), links without latency, transfer and step
overheads, overlapped latency, multi-slot devices. Every number must match
exactly (floats are stored with `repr`, which round-trips).

Regenerate only when the simulator's semantics change on purpose:
  python tests/simulator/kernel_regression_test.py
(Last: 2026-11-29, small constants TF copies to their consumers' devices,
`replicated_constants`: only mlp_2tower on the multi-CPU clusters moved.)
"""

import dataclasses
import json
import os
import sys

import numpy as np

import tfplace  # noqa: F401
from tfplace.cost.analytical import AnalyticalCostModel
from tfplace.cost.cluster import Cluster
from tfplace.cost.op_costs import OpCosts
from tfplace.cost.presets import cpu_cluster, load_cluster
from tfplace.graph.op_graph import Edge, Op, OpGraph, StepFetches
from tfplace.simulator.simulator import Simulator

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
_EXPECTED = os.path.join(_ROOT, "testdata", "simulator", "kernel_expected.json")
_PLACEMENTS = 6


def _layered_with_init(num_ops: int = 240, width: int = 12,
                       seed: int = 3) -> OpGraph:
  """Layers of ops reading 1-3 ops of the two layers before, variables
  (param bytes, one colocation group with their update), a loss and a train
  op, and an initialization subgraph the step does not run."""
  rng = np.random.default_rng(seed)
  ops, edges = [], []
  for i in range(num_ops):
    nbytes = int(rng.integers(1 << 10, 1 << 20))
    kernels = frozenset({"CPU"} if i == 0 else {"CPU", "GPU"})
    ops.append(Op(name=f"op{i}", type="MatMul", output_shapes=((nbytes // 4,),),
                  output_dtypes=("float32",), output_bytes=(nbytes,),
                  flops=float(rng.uniform(1e6, 1e9)), kernels=kernels))
    layer = i // width
    if layer == 0:
      continue
    lo = max(0, (layer - 2) * width)
    for src in sorted(set(rng.integers(lo, layer * width,
                                       size=rng.integers(1, 4)).tolist())):
      edges.append(Edge(src, i, 0, ops[src].output_bytes[0]))
  last = num_ops - 1
  for v in range(4):
    var = len(ops)
    ops.append(Op(name=f"var{v}", type="VarHandleOp", output_shapes=((),),
                  output_dtypes=("resource",), output_bytes=(8,),
                  param_bytes=int(rng.integers(1 << 16, 1 << 22))))
    ops.append(Op(name=f"update{v}", type="AssignSubVariableOp",
                  colocation_names=(f"var{v}",)))
    ops.append(Op(name=f"init_value{v}", type="RandomStandardNormal",
                  output_shapes=((1024,),), output_dtypes=("float32",),
                  output_bytes=(4096,), flops=1e5))
    ops.append(Op(name=f"init{v}", type="AssignVariableOp",
                  colocation_names=(f"var{v}",)))
    reader = int(rng.integers(0, width))
    edges += [Edge(var, reader, 0, 8), Edge(var, var + 1, 0, 8),
              Edge(last, var + 1, 0, ops[last].output_bytes[0]),
              Edge(var, var + 3, 0, 8), Edge(var + 2, var + 3, 0, 4096)]
  ops.append(Op(name="train", type="NoOp"))
  edges += [Edge(update, len(ops) - 1, -1, 0)
            for update in range(num_ops + 1, len(ops) - 1, 4)]
  return OpGraph(ops, edges, graph_def=None, name="layered_init",
                 fetches=StepFetches(train_ops=("train",),
                                     loss=f"op{last}:0",
                                     init_ops=tuple(f"init{v}"
                                                    for v in range(4))))


def _clusters():
  k80 = load_cluster("k80x4")
  slow_hosts = dataclasses.replace(
      k80, name="k80x4_overheads", step_overhead_s=1e-3, overlap_latency=True,
      devices=tuple(dataclasses.replace(d, transfer_overhead_s=2e-5)
                    for d in k80.devices))
  return {
      "k80x4": k80,
      "k80x4_overheads": slow_hosts,
      "cpu_gpu": Cluster.from_json_file(
          os.path.join(_ROOT, "testdata", "clusters", "cpu_gpu.json")),
      "cpu3_no_latency_2slots": cpu_cluster(3, latency_s=0.0, slots=2),
  }


# Device memory of the tight-memory cluster per graph: about the median peak
# of the random placements, so some fit and some do not.
_TIGHT_MEMORY = {"mlp_2tower": 1750.0, "layered_init": 19.5e6}


def _graphs():
  from tfplace.graph.importers import import_graph
  return {
      "mlp_2tower": import_graph(os.path.join(_ROOT, "testdata",
                                              "mlp_2tower.pbtxt")),
      "layered_init": _layered_with_init(),
  }


def _costs(graph: OpGraph, cluster: Cluster, zero_some: bool) -> OpCosts:
  costs = _memory_as_recorded(graph,
                              AnalyticalCostModel().op_costs(graph, cluster))
  if not zero_some:
    return costs
  compute = np.array(costs.compute_s, copy=True)
  rows = np.flatnonzero(graph.step_mask)[::5]
  compute[rows] = np.where(np.isfinite(compute[rows]), 0.0, compute[rows])
  return OpCosts(compute, costs.param_bytes, costs.output_bytes)


def _memory_as_recorded(graph: OpGraph, costs: OpCosts) -> OpCosts:
  """The costs with the memory inputs the expected results were computed
  from: a constant's tensor an output (live until its readers end; none
  outside the step), as the analytical model had it until constants became
  resident (2026-11-29).
  The kernel is what this test checks, not the cost model."""
  const = graph.resident_bytes - graph.param_bytes
  return dataclasses.replace(
      costs, param_bytes=costs.param_bytes - const,
      output_bytes=costs.output_bytes + const * graph.step_mask)


def _placements(graph: OpGraph, costs: OpCosts, num_devices: int,
                seed: int) -> np.ndarray:
  rng = np.random.default_rng(seed)
  groups = rng.integers(0, num_devices,
                        size=(_PLACEMENTS, graph.num_colocation_groups))
  ids = groups[:, graph.group_of]
  ok = np.isfinite(costs.compute_s)
  first = np.argmax(ok, axis=1)
  ids = np.where(ok[np.arange(graph.num_ops), ids], ids, first[None, :])
  # And everything on the last device: no kernel for a CPU-only op on a GPU.
  last = np.full((1, graph.num_ops), num_devices - 1)
  return np.concatenate([ids, last]).astype(np.int32)


def _cases():
  """(name, simulator, placements) for every case, in a fixed order."""
  seed = 0
  for gname, graph in _graphs().items():
    clusters = dict(_clusters(), cpu2_tight_memory=cpu_cluster(
        2, memory_bytes=_TIGHT_MEMORY[gname]))
    for cname, cluster in clusters.items():
      for zero_some in (False, True):
        costs = _costs(graph, cluster, zero_some)
        ids = _placements(graph, costs, cluster.num_devices, seed)
        seed += 1
        name = f"{gname}/{cname}" + ("/zero_cost_ops" if zero_some else "")
        yield name, Simulator(graph, cluster, costs), ids


def _number(x: float):
  return repr(float(x))


def _results(sim: Simulator, ids: np.ndarray) -> dict:
  single = [sim.simulate(row) for row in ids]
  return {
      "batch": [_number(x) for x in sim.simulate_batch(ids)],
      "step": [_number(r.step_time_s) for r in single],
      "busy": [[_number(x) for x in r.device_busy_s] for r in single],
      "peak": [r.peak_memory_bytes.tolist() for r in single],
      "moved": [r.bytes_moved for r in single],
      "oom": [list(r.oom_devices) for r in single],
  }


def _compute_all() -> dict:
  return {name: _results(sim, ids) for name, sim, ids in _cases()}


def test_results_match_the_kernel_before_the_speedups():
  with open(_EXPECTED) as f:
    expected = json.load(f)
  actual = _compute_all()
  assert sorted(actual) == sorted(expected)
  for name in expected:
    assert actual[name] == expected[name], name


def test_cases_cover_infeasible_and_feasible_placements():
  with open(_EXPECTED) as f:
    expected = json.load(f)
  steps = [s for case in expected.values() for s in case["batch"]]
  assert "inf" in steps
  assert sum(s != "inf" for s in steps) > len(steps) // 2


if __name__ == "__main__":
  os.makedirs(os.path.dirname(_EXPECTED), exist_ok=True)
  with open(_EXPECTED, "w") as out:
    json.dump(_compute_all(), out, indent=0, sort_keys=True)
  sys.stdout.write(f"wrote {_EXPECTED}\n")
