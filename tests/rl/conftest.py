"""Fixtures: small placement problems whose answers can be worked out by hand."""

import numpy as np
import pytest

from tfplace.cost.op_costs import OpCosts
from tfplace.cost.presets import cpu_cluster
from tfplace.graph.op_graph import Edge, Op, OpGraph
from tfplace.placers.problem import PlacementProblem


def two_group_problem(memory_bytes: float = 8e9) -> PlacementProblem:
  """Two independent ops, each its own group, on two devices.

  Each op takes 1 s on device 1 and 10 s on device 0, so both groups on
  device 1 (2 s) is the one right answer: either on device 0 costs >= 10 s.
  """
  ops = [Op("a", "MatMul", output_bytes=(100,)),
         Op("b", "Conv2D", output_bytes=(100,))]
  graph = OpGraph(ops, [], graph_def=None, name="two_groups")
  compute = np.array([[10.0, 1.0], [10.0, 1.0]])
  costs = OpCosts(compute, graph.param_bytes, graph.output_bytes)
  return PlacementProblem(graph, cpu_cluster(2, memory_bytes=memory_bytes),
                          costs)


def chain_problem(num_ops: int = 12, num_devices: int = 3,
                  blocked=((2, 1),), param_bytes=None,
                  memory_bytes: float = 8e9) -> PlacementProblem:
  """Two parallel chains of `num_ops // 2` ops joined at the end.

  Op i takes (1 + i % 3) s everywhere; `blocked` (op, device) pairs have no
  kernel (infinite cost). Ops 0 and 1 are colocated.
  """
  half = num_ops // 2
  ops = [Op(f"op{i}", ["MatMul", "Relu", "Add"][i % 3], output_bytes=(1000,),
            param_bytes=(param_bytes or {}).get(i, 0)) for i in range(num_ops)]
  edges = [Edge(i, i + 1, 0, 1000) for i in range(half - 1)]
  edges += [Edge(i, i + 1, 0, 1000) for i in range(half, num_ops - 1)]
  edges.append(Edge(half - 1, num_ops - 1, 0, 1000))
  groups = np.arange(num_ops)
  groups[1] = 0
  graph = OpGraph(ops, edges, graph_def=None, name="chains",
                  colocation_groups=groups)
  compute = np.tile((1.0 + np.arange(num_ops) % 3)[:, None], (1, num_devices))
  for op, device in blocked:
    compute[op, device] = np.inf
  costs = OpCosts(compute, graph.param_bytes, graph.output_bytes)
  cluster = cpu_cluster(num_devices, memory_bytes=memory_bytes,
                        bandwidth=1e6)
  return PlacementProblem(graph, cluster, costs)


@pytest.fixture(name="two_groups")
def two_groups_fixture():
  return two_group_problem()


@pytest.fixture(name="chains")
def chains_fixture():
  return chain_problem()
