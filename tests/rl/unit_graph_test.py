"""Unit ids of an action and rows of the unit graph agree."""

import numpy as np

from tfplace.grouping import chunks


def test_unit_graph_rows_are_the_codec_units(chains):
  groups = chains.groups
  start = np.arange(groups.num_groups) % 3
  labels = chunks.units(groups, start, 2)
  unit_graph, unit_of = chunks.unit_group_graph(chains.graph, chains.costs,
                                                groups, labels)
  # Same partition of the colocation groups, numbered as the graph does.
  pairs = set(zip(labels.tolist(), unit_of.tolist()))
  assert len(pairs) == len(set(labels.tolist())) == unit_graph.num_groups
  for u in range(unit_graph.num_groups):
    members = np.flatnonzero(unit_of == u)
    ops = np.concatenate([groups.members[g] for g in members])
    assert sorted(ops.tolist()) == sorted(unit_graph.members[u].tolist())
