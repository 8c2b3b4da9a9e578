"""Synthetic graphs: deterministic, a real training step, bad names."""

import numpy as np
import pytest

from tfplace.errors import GraphImportError
from tfplace.models.synthetic import build_synthetic, layered_dag, towers


def test_builders_are_deterministic():
  a, b = towers(seed=5), towers(seed=5)
  assert [op.name for op in a.ops] == [op.name for op in b.ops]
  assert a.edges == b.edges
  assert layered_dag(60, 6, seed=1).edges == layered_dag(60, 6, seed=1).edges


def test_towers_is_a_training_step_with_colocated_updates():
  graph = towers(num_towers=2, layers=3, seed=0)
  step = graph.step_mask
  init = [i for i, op in enumerate(graph.ops) if op.name.endswith("/init")]
  assert init and not step[init].any()  # The initializer is not in the step.
  update = graph.index["t0/l1/update"]
  assert step[update]
  assert graph.group_of[update] == graph.group_of[graph.index["t0/l1/w"]]
  assert graph.ops[graph.index["t1/input"]].kernels == frozenset({"CPU"})
  assert len(np.unique(graph.group_of)) < graph.num_ops


def test_unknown_graph_or_argument_is_a_clear_error():
  with pytest.raises(GraphImportError, match="unknown synthetic graph"):
    build_synthetic("nosuch")
  with pytest.raises(GraphImportError, match="towers"):
    build_synthetic("towers", depth=3)
