"""ColocRL's units: topological chunks split by the start placement."""

import numpy as np

from tfplace.grouping import chunks


def test_renumber_by_first_appearance():
  np.testing.assert_array_equal(chunks.renumber(np.array([7, 3, 7, 5])),
                                [0, 1, 0, 2])
  np.testing.assert_array_equal(
      chunks.renumber(np.array([7, 3, 7, 5]), order=np.array([3, 2, 1, 0])),
      [1, 2, 1, 0])


def test_chunks_are_topological_runs(chains):
  groups = chains.groups
  chunk = chunks.topo_chunks(groups, 3)
  assert sorted(set(chunk.tolist())) == [0, 1, 2]
  along = chunk[groups.topo_order()]
  assert np.all(np.diff(along) >= 0)


def test_units_split_chunks_by_device_so_the_start_is_exact(chains):
  groups = chains.groups
  start = np.arange(groups.num_groups) % 3
  unit_of = chunks.units(groups, start, 2)
  for u in range(unit_of.max() + 1):
    assert len(set(start[unit_of == u].tolist())) == 1
  # Two chunks, each over 3 devices.
  assert unit_of.max() + 1 == 6
