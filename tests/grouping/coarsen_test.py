"""Coarsening to K groups: whole colocation groups, classes kept apart."""

import numpy as np
import pytest

from tfplace.cost.op_costs import OpCosts
from tfplace.errors import PlacementError
from tfplace.graph.op_graph import Edge, Op, OpGraph
from tfplace.grouping.coarsen import coarsen_to_k
from tfplace.grouping.group_graph import build_group_graph
from tfplace.models.synthetic import towers


def _chain(n, cpu_only=(), heavy=()):
  """op0 -> op1 -> ... (1 KB tensors, op k -> k+1 carries k+1 KB); ops 0 and
  1 are one colocation group; each op costs 1 s (10 s if heavy)."""
  ops = [Op(f"op{i}", "MatMul", output_bytes=(1024 * (i + 1),),
            kernels=frozenset({"CPU"} if i in cpu_only else {"CPU", "GPU"}))
         for i in range(n)]
  edges = [Edge(i, i + 1, 0, 1024 * (i + 1)) for i in range(n - 1)]
  groups = np.arange(n)
  groups[1] = 0
  graph = OpGraph(ops, edges, graph_def=None, colocation_groups=groups)
  seconds = np.array([10.0 if i in heavy else 1.0 for i in range(n)])
  compute = np.stack([seconds, np.where(
      [i in cpu_only for i in range(n)], np.inf, seconds / 4)], axis=1)
  return graph, OpCosts(compute, np.zeros(n, np.int64),
                        np.full(n, 1024, np.int64))


@pytest.mark.parametrize("method", ["metis", "heavy_edge"])
def test_colocation_groups_are_never_split(method):
  graph = towers(num_towers=3, layers=4, seed=1)
  compute = np.array([[1e-3 * (i % 7 + 1), 1e-4 * (i % 5 + 1)]
                      for i in range(graph.num_ops)])
  compute[[i for i, op in enumerate(graph.ops) if op.kernels == {"CPU"}], 1] = (
      np.inf)
  costs = OpCosts(compute, graph.param_bytes, graph.output_bytes)
  labels = coarsen_to_k(graph, costs, 12, method)
  for group in graph.colocation_groups:
    assert len(set(labels[group].tolist())) == 1
  assert 2 <= len(np.unique(labels)) <= 12
  coarse = build_group_graph(graph, costs, labels)
  # CPU-only ops stay apart from ops that could run on the GPU.
  assert all(row.all() or not row[1] for row in coarse.allowed)


def test_heavy_edge_merges_along_the_heaviest_edges_to_exactly_k():
  graph, costs = _chain(8)
  labels = coarsen_to_k(graph, costs, 4, "heavy_edge")
  # Each op weighs 0.625 s (1 s on the CPU, 0.25 s on the GPU, averaged):
  # 5 s in all, a cap of 5 / 4 = 1.25 s, i.e. two ops per group. The
  # heaviest edge is 6 -> 7, then 5 -> 6 (too heavy), 4 -> 5, 3 -> 4 (too
  # heavy), 2 -> 3; ops 0 and 1 are one colocation group already.
  groups = [labels[i] for i in range(8)]
  assert groups[0] == groups[1] and groups[2] == groups[3]
  assert groups[4] == groups[5] and groups[6] == groups[7]
  assert len(set(groups)) == 4


def test_a_single_device_class_becomes_one_group():
  graph, costs = _chain(8, cpu_only=(4, 5, 7))
  labels = coarsen_to_k(graph, costs, 3, "metis")
  assert labels[4] == labels[5] == labels[7]
  assert labels[4] not in labels[[0, 1, 2, 3, 6]]


def test_at_most_k_groups_returns_the_colocation_groups():
  graph, costs = _chain(5)
  np.testing.assert_array_equal(coarsen_to_k(graph, costs, 10),
                                graph.group_of)


def test_bad_method_or_size_is_a_clear_error():
  graph, costs = _chain(5)
  with pytest.raises(PlacementError, match="unknown coarsening method"):
    coarsen_to_k(graph, costs, 3, "spectral")
  with pytest.raises(PlacementError, match="at least 1 group"):
    coarsen_to_k(graph, costs, 0)
