"""Tests for the simple baseline placers on hand-built graphs."""

import tfplace  # noqa: F401  (before TensorFlow)

import numpy as np
import pytest

from tfplace.cost.cluster import Cluster, Device
from tfplace.cost.op_costs import OpCosts
from tfplace.errors import PlacementError
from tfplace.graph.op_graph import Edge, Op, OpGraph
from tfplace.placers import heuristics
from tfplace.placers.registry import get_placer
from tfplace.placers.problem import PlacementProblem

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
GPU1 = "/job:localhost/replica:0/task:0/device:GPU:1"


def make_cluster(gpu_flops=(1e12, 2e12), gpu_memory=1e9):
  """CPU (1e11 FLOP/s) + GPUs."""
  devices = [Device(CPU, "CPU", 1e11, 1e10, 1e10)]
  for k, flops in enumerate(gpu_flops):
    devices.append(Device(f"/device:GPU:{k}", "GPU", flops, 1e11, gpu_memory))
  return Cluster("test", tuple(devices))


def make_costs(graph, cluster):
  """compute = flops / peak; inf without a kernel."""
  compute = np.array([[op.flops / d.peak_flops if d.type in op.kernels
                       else np.inf for d in cluster.devices]
                      for op in graph.ops])
  return OpCosts(compute, graph.param_bytes, graph.output_bytes)


def problem(graph, cluster):
  return PlacementProblem(graph, cluster, make_costs(graph, cluster))


def chain_graph():
  """a -> b -> c -> d -> e; `c` is CPU-only; {b, var_update} colocated."""
  ops = [Op("a", "Const", flops=1e9, output_bytes=(100,)),
         Op("b", "MatMul", flops=1e9, output_bytes=(100,), param_bytes=1000),
         Op("c", "PyFunc", flops=1e9, output_bytes=(100,),
            kernels=frozenset({"CPU"})),
         Op("d", "MatMul", flops=1e9, output_bytes=(100,)),
         Op("e", "MatMul", flops=1e9, output_bytes=(100,)),
         Op("var_update", "AssignSub", flops=1e6)]
  edges = [Edge(0, 1, 0, 100), Edge(1, 2, 0, 100), Edge(2, 3, 0, 100),
           Edge(3, 4, 0, 100), Edge(4, 5, 0, 100)]
  return OpGraph(ops, edges, None, name="chain",
                 colocation_groups=np.array([0, 1, 2, 3, 4, 1]))


ALL = ["single_cpu", "single_gpu", "round_robin", "hash", "critical_path"]


@pytest.mark.parametrize("name", ALL)
def test_valid_placement(name):
  graph, cluster = chain_graph(), make_cluster()
  placement = get_placer(name).place(problem(graph, cluster), seed=1)
  placement.validate(graph, cluster)
  assert placement.devices["c"] == CPU  # The CPU-only op.
  assert placement.devices["b"] == placement.devices["var_update"]
  assert placement.metadata.placer == name


def test_single_cpu():
  graph, cluster = chain_graph(), make_cluster()
  p = heuristics.SingleCpuPlacer().place(problem(graph, cluster))
  assert set(p.devices.values()) == {CPU}


def test_single_gpu_uses_fastest_gpu_and_cpu_for_cpu_only_ops():
  graph, cluster = chain_graph(), make_cluster(gpu_flops=(1e12, 2e12))
  p = heuristics.SingleGpuPlacer().place(problem(graph, cluster))
  assert {n: d for n, d in p.devices.items() if d != GPU1} == {"c": CPU}


def test_single_gpu_without_gpu_is_an_error():
  graph = chain_graph()
  cluster = Cluster("cpu", (Device(CPU, "CPU", 1e11, 1e10, 1e10),))
  with pytest.raises(PlacementError, match="no GPU"):
    heuristics.SingleGpuPlacer().place(problem(graph, cluster))


def test_round_robin_alternates_in_topological_order():
  ops = [Op(f"op{i}", "Add", flops=1e6) for i in range(6)]
  edges = [Edge(i, i + 1, 0, 4) for i in range(5)]
  graph, cluster = OpGraph(ops, edges, None), make_cluster()
  p = heuristics.RoundRobinPlacer().place(problem(graph, cluster))
  assert [p.devices[f"op{i}"] for i in range(6)] == [CPU, GPU0, GPU1] * 2


def test_round_robin_skips_full_device():
  ops = [Op("big", "Add", flops=1e6, param_bytes=2e9)] + [
      Op(f"op{i}", "Add", flops=1e6) for i in range(1, 3)]
  graph = OpGraph(ops, [Edge(0, 1, 0, 4), Edge(1, 2, 0, 4)], None)
  cluster = make_cluster(gpu_memory=1e9)
  p = heuristics.RoundRobinPlacer().place(problem(graph, cluster))
  # big (2 GB) fits only the CPU (10 GB); op1's turn is GPU0, op2's GPU1.
  assert [p.devices[n] for n in ("big", "op1", "op2")] == [CPU, GPU0, GPU1]


def test_hash_is_deterministic_and_proportional_to_capacity():
  ops = [Op(f"op{i}", "Add", flops=1e6) for i in range(600)]
  graph = OpGraph(ops, [], None)
  cluster = make_cluster(gpu_flops=(1e11, 4e11))  # Capacities 1 : 1 : 4.
  p1 = heuristics.HashPlacer().place(problem(graph, cluster), seed=3)
  p2 = heuristics.HashPlacer().place(problem(graph, cluster), seed=3)
  p3 = heuristics.HashPlacer().place(problem(graph, cluster), seed=4)
  assert p1.devices == p2.devices
  assert p1.devices != p3.devices
  counts = p1.device_counts()
  assert 60 <= counts[CPU] <= 140  # Expected 100.
  assert 60 <= counts[GPU0] <= 140  # Expected 100.
  assert 330 <= counts[GPU1] <= 470  # Expected 400.


def test_critical_path_on_fastest_device_rest_balanced():
  ops = [Op("s", "Add", flops=1e6), Op("heavy", "MatMul", flops=1e10),
         Op("light", "MatMul", flops=1e9), Op("t", "Add", flops=1e6)]
  edges = [Edge(0, 1, 0, 4), Edge(0, 2, 0, 4), Edge(1, 3, 0, 4),
           Edge(2, 3, 0, 4)]
  graph, cluster = OpGraph(ops, edges, None), make_cluster((1e12, 2e12))
  p = heuristics.CriticalPathPlacer().place(problem(graph, cluster))
  for name in ("s", "heavy", "t"):
    assert p.devices[name] == GPU1
  # GPU1 is loaded with 5 ms; "light" finishes first on GPU0 (1 ms).
  assert p.devices["light"] == GPU0


def test_group_with_no_common_device_is_an_error():
  ops = [Op("cpu_only", "A", kernels=frozenset({"CPU"})),
         Op("gpu_only", "B", kernels=frozenset({"GPU"}))]
  graph = OpGraph(ops, [], None, colocation_groups=np.array([0, 0]))
  cluster = make_cluster()
  with pytest.raises(PlacementError, match="no common device"):
    heuristics.SingleCpuPlacer().place(problem(graph, cluster))
