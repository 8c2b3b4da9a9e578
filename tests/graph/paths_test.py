"""Longest paths through the op DAG, worked by hand."""

import numpy as np
import pytest

import tfplace  # noqa: F401
from tfplace.graph import paths
from tfplace.graph.op_graph import Edge, Op, OpGraph


def diamond():
  #   0 -> 1 -> 3
  #   0 -> 2 -> 3
  ops = [Op(name=f"op{i}", type="MatMul") for i in range(4)]
  edges = [Edge(0, 1, 0, 8), Edge(0, 2, 0, 8), Edge(1, 3, 0, 8),
           Edge(2, 3, -1, 0)]
  return OpGraph(ops, edges, graph_def=None)


def test_critical_path_takes_the_longest_branch():
  path, length = paths.critical_path(diamond(), np.array([1.0, 5.0, 2.0, 1.0]))
  assert path.tolist() == [0, 1, 3]
  assert length == pytest.approx(7.0)  # 1 + max(5, 2) + 1.


def test_control_edges_count_and_the_other_branch_can_win():
  path, length = paths.critical_path(diamond(), np.array([1.0, 2.0, 5.0, 1.0]))
  assert path.tolist() == [0, 2, 3]
  assert length == pytest.approx(7.0)


def test_top_and_bottom_levels():
  g = diamond()
  t = np.array([1.0, 5.0, 2.0, 1.0])
  finish, parent = paths.top_levels(g, t)
  assert finish.tolist() == [1.0, 6.0, 3.0, 7.0]
  assert parent.tolist() == [-1, 0, 0, 1]
  assert paths.bottom_levels(g, t).tolist() == [7.0, 6.0, 3.0, 1.0]


def test_loop_back_edges_are_left_out():
  # enter -> merge -> next_iteration -> (back edge) merge.
  ops = [Op("enter", "Enter"), Op("merge", "Merge"),
         Op("next", "NextIteration")]
  edges = [Edge(0, 1, 0, 4), Edge(1, 2, 0, 4), Edge(2, 1, 0, 4)]
  g = OpGraph(ops, edges, graph_def=None)
  assert g.dag_edge_mask.tolist() == [True, True, False]
  path, length = paths.critical_path(g, np.ones(3))
  assert path.tolist() == [0, 1, 2]
  assert length == 3.0
