"""Tests for the group-level view (tfplace.grouping.group_graph)."""

import tfplace  # noqa: F401  (before TensorFlow)

import numpy as np
import pytest

from tfplace.cost.op_costs import OpCosts
from tfplace.errors import PlacementError
from tfplace.graph.op_graph import Edge, Op, OpGraph
from tfplace.grouping.group_graph import build_group_graph


def variable_graph():
  """var -> read -> mul -> update -> var's group; x -> mul.

  Ops: 0 var, 1 read, 2 x, 3 mul, 4 update; groups {var, read, update},
  {x}, {mul}. Costs on 2 devices: op i takes (i+1) s on device 0 and
  10*(i+1) s on device 1, except x (no kernel on device 1).
  """
  ops = [Op("var", "VarHandleOp", param_bytes=400),
         Op("read", "ReadVariableOp", output_bytes=(400,)),
         Op("x", "Const", output_bytes=(40,)),
         Op("mul", "MatMul", output_bytes=(40,)),
         Op("update", "AssignSub")]
  edges = [Edge(0, 1, 0, 0),
           Edge(1, 3, 0, 400),
           Edge(2, 3, 0, 40),
           Edge(3, 4, 0, 40),
           Edge(3, 4, 0, 40),   # Same tensor read twice: counted once.
           Edge(0, 4, 0, 0),
           Edge(2, 4, -1, 0)]   # Control edge.
  graph = OpGraph(ops, edges, None, colocation_groups=np.array([7, 7, 3, 5, 7]))
  compute = np.array([[i + 1.0, 10.0 * (i + 1)] for i in range(5)])
  compute[2, 1] = np.inf
  costs = OpCosts(compute, graph.param_bytes, graph.output_bytes)
  return graph, costs


def test_groups_and_sums():
  graph, costs = variable_graph()
  gg = build_group_graph(graph, costs)
  assert gg.num_groups == 3
  assert [m.tolist() for m in gg.members] == [[0, 1, 4], [2], [3]]
  np.testing.assert_allclose(gg.compute_s, [[8, 80], [3, np.inf], [4, 40]])
  assert gg.allowed.tolist() == [[True, True], [True, False], [True, True]]
  assert gg.param_bytes.tolist() == [400, 0, 0]
  assert gg.output_bytes.tolist() == [400, 40, 40]
  assert gg.memory_bytes.tolist() == [800, 40, 40]


def test_edges_drop_self_loops_and_sum_parallel_edges():
  graph, costs = variable_graph()
  gg = build_group_graph(graph, costs)
  edges = {(int(s), int(d)): int(b) for s, d, b in
           zip(gg.edge_src, gg.edge_dst, gg.edge_bytes)}
  # read->mul 400 B; x->mul 40 B; mul->update 40 B (once); x->update control.
  assert edges == {(0, 2): 400, (1, 2): 40, (2, 0): 40, (1, 0): 0}


def test_group_graph_may_have_cycles_and_topo_rank_orders_groups():
  graph, costs = variable_graph()
  gg = build_group_graph(graph, costs)
  # Op topo order: var, x, read, mul, update -> ranks: group0 0, x 1, mul 3.
  assert gg.topo_rank.tolist() == [0, 1, 3]
  assert gg.topo_order().tolist() == [0, 1, 2]


def test_undirected_adjacency_merges_directions():
  graph, costs = variable_graph()
  ptr, nbr, nbytes = build_group_graph(graph, costs).undirected_adjacency()
  adj = {(g, int(n)): int(b) for g in range(3)
         for n, b in zip(nbr[ptr[g]:ptr[g + 1]], nbytes[ptr[g]:ptr[g + 1]])}
  assert adj == {(0, 2): 440, (2, 0): 440, (1, 2): 40, (2, 1): 40,
                 (0, 1): 0, (1, 0): 0}


def test_expand_and_custom_groups():
  graph, costs = variable_graph()
  gg = build_group_graph(graph, costs)
  assert gg.expand([1, 0, 1]).tolist() == [1, 1, 0, 1, 1]
  with pytest.raises(PlacementError):
    gg.expand([0, 1])
  merged = build_group_graph(graph, costs, group_of=np.array([9, 9, 4, 9, 9]))
  assert merged.num_groups == 2
  np.testing.assert_allclose(merged.compute_s, [[12, 120], [3, np.inf]])
  assert list(zip(merged.edge_src, merged.edge_dst, merged.edge_bytes)) == [
      (1, 0, 40)]  # x->mul data and x->update control merge.


def test_bad_group_of_shape():
  graph, costs = variable_graph()
  with pytest.raises(PlacementError, match="shape"):
    build_group_graph(graph, costs, group_of=np.zeros(3))
