"""Placeto's constant view of a group graph: reachability and relations."""

import numpy as np
import pytest

from tfplace.errors import PlacementError
from tfplace.rl.progressive_graph import build_progressive_graph, reachability


def test_reachability_of_a_diamond_and_a_loose_node():
  # 0 -> 1 -> 3, 0 -> 2 -> 3; node 4 alone.
  reach = reachability(5, [0, 0, 1, 2], [1, 2, 3, 3])
  expected = np.zeros((5, 5), bool)
  expected[0, [1, 2, 3]] = True
  expected[1, 3] = expected[2, 3] = True
  np.testing.assert_array_equal(reach, expected)


def test_nodes_on_a_cycle_reach_each_other_and_themselves():
  # 0 -> 1 -> 2 -> 1 (a cycle of 1 and 2), 2 -> 3.
  reach = reachability(4, [0, 1, 2, 2], [1, 2, 1, 3])
  np.testing.assert_array_equal(reach[0], [False, True, True, True])
  np.testing.assert_array_equal(reach[1], [False, True, True, True])
  np.testing.assert_array_equal(reach[2], [False, True, True, True])
  assert not reach[3].any()


def test_relations_of_two_parallel_chains(chains):
  # Ops 0..5 and 6..11 form two chains joined at op 11; ops 0 and 1 share a
  # group, so group ids are op ids minus one from op 2 on.
  view = build_progressive_graph(chains.graph, chains.groups, 10.0)
  g = chains.groups.num_groups
  assert view.descendants.shape == (g, g)
  assert view.num_devices == 3
  first_chain, second_chain, join = [0, 1, 2, 3, 4], [5, 6, 7, 8, 9], 10
  assert view.descendants[0, [1, 2, 3, 4, join]].all()
  assert not view.descendants[0, second_chain].any()
  assert view.ancestors[join, first_chain + second_chain].all()
  assert view.parallel[2, second_chain].all()
  assert not view.parallel[2, first_chain + [join]].any()
  # Visit order is topological: every edge goes forward in it.
  position = view.position
  assert np.all(position[view.edge_src] < position[view.edge_dst])
  assert view.features.shape == (g, len(view.feature_names))
  assert view.features.min() >= 0 and view.features.max() <= 1


def test_reference_must_be_positive(chains):
  with pytest.raises(PlacementError, match="positive and finite"):
    build_progressive_graph(chains.graph, chains.groups, np.inf)
