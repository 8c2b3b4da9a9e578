"""Mayer et al.'s multi-objective heuristic on hand-checkable graphs."""

import numpy as np

from tfplace.cost.op_costs import OpCosts
from tfplace.graph.op_graph import Edge, Op, OpGraph
from tfplace.grouping.group_graph import build_group_graph
from tfplace.placers.multi_objective import (MultiObjectiveWeights,
                                             group_importance,
                                             multi_objective_placement)
import search_testlib as lib


def _graph():
  """long (3 s) and short (1 s) branches from a source to a sink; device 1
  runs everything twice as fast as device 0."""
  ops = [Op(n, "MatMul", output_bytes=(4,)) for n in
         ("src", "long", "short", "sink")]
  edges = [Edge(0, 1, 0, 4), Edge(0, 2, 0, 4), Edge(1, 3, 0, 4),
           Edge(2, 3, 0, 4)]
  seconds = np.array([1.0, 3.0, 1.0, 1.0])
  costs = OpCosts(np.stack([seconds, seconds / 2], axis=1),
                  np.zeros(4, int), np.zeros(4, int))
  return OpGraph(ops, edges, graph_def=None), costs


def test_importance_is_the_longest_path_through_the_group():
  graph, costs = _graph()
  groups = build_group_graph(graph, costs)
  importance = group_importance(graph, groups, costs.compute_s[:, 1])
  np.testing.assert_allclose(importance, [1.0, 1.0, 0.6, 1.0])


def test_the_critical_path_goes_to_the_fast_device():
  graph, costs = _graph()
  _, _, cluster = lib.space(graph, costs)
  groups = build_group_graph(graph, costs)
  devices = multi_objective_placement(graph, groups, cluster,
                                      costs.compute_s[:, 1],
                                      MultiObjectiveWeights())
  assert devices[[0, 1, 3]].tolist() == [1, 1, 1]


def test_memory_weight_alone_spreads_by_free_memory():
  graph, costs = lib.independent_ops(4, param_bytes=100)
  _, _, cluster = lib.space(graph, costs, memory_bytes=1000)
  groups = build_group_graph(graph, costs)
  devices = multi_objective_placement(
      graph, groups, cluster, costs.compute_s[:, 0],
      MultiObjectiveWeights(memory=1.0, importance=0.0, traffic=0.0,
                            execution_time=0.0))
  assert sorted(np.bincount(devices, minlength=2).tolist()) == [2, 2]
