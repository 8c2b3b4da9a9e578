"""Per-group features from a GroupGraph."""

import numpy as np

from tfplace.rl import features


def test_shapes_names_and_scale(chains):
  groups = chains.groups
  f = features.group_features(chains.graph, groups)
  assert f.values.shape == (groups.num_groups, len(f.names))
  assert f.values.dtype == np.float32
  assert np.all(np.abs(f.values) <= 1.0 + 1e-6)
  assert f.vocabulary == ("Add", "MatMul", "Relu")  # 4 each; ties by name.
  col = {n: i for i, n in enumerate(f.names)}
  # Group 0 holds ops 0 (MatMul) and 1 (Relu): one of each, the most ops.
  assert f.values[0, col["type:MatMul"]] > 0
  assert f.values[0, col["type:Add"]] == 0
  assert f.values[0, col["ops"]] == 1.0
  # The blocked device gets 0 compute (no kernel).
  assert f.values[1, col["compute:1"]] == 0.0


def test_topological_position_runs_from_0_to_1(chains):
  pos = features.topo_position(chains.groups)
  assert pos.min() == 0.0 and pos.max() == 1.0
  assert len(set(pos.tolist())) == chains.groups.num_groups
