"""The memory rule: penalty or repair."""

import numpy as np
import pytest

from tfplace.errors import PlacementError
from tfplace.rl.environments.evaluator import (GroupMemory, PlacementEvaluator,
                                               repair)


def memory():
  # Groups of 6, 3, 2, 1 bytes; devices of 10 and 10 bytes (fill 0.9: 9).
  return GroupMemory(np.array([6.0, 3.0, 2.0, 1.0]), np.array([10.0, 10.0]),
                     np.ones((4, 2), bool))


def test_repair_moves_the_largest_groups_off_the_full_device():
  # All on device 0: 12 bytes > 9. Moving the 6-byte group leaves 6 <= 9.
  np.testing.assert_array_equal(repair(np.zeros(4, np.int32), memory()),
                                [1, 0, 0, 0])


def test_repair_respects_allowed_devices():
  mem = memory()
  allowed = mem.allowed.copy()
  allowed[0, 1] = False
  mem = GroupMemory(mem.group_bytes, mem.capacity_bytes, allowed)
  # The 6-byte group may not move; the 3-byte one goes instead: 9 <= 9.
  np.testing.assert_array_equal(repair(np.zeros(4, np.int32), mem),
                                [0, 1, 0, 0])


def fake_simulator(devices):
  """Step time = number of groups on device 1 + 1; inf if > 9 bytes on one
  device (the repair rule's estimate)."""
  sizes = np.array([6.0, 3.0, 2.0, 1.0])
  load = np.stack([np.bincount(d, weights=sizes, minlength=2)
                   for d in devices])
  times = (devices == 1).sum(axis=1) + 1.0
  return np.where((load > 9).any(axis=1), np.inf, times)


def test_penalty_keeps_infeasible_and_counts_evaluations():
  ev = PlacementEvaluator(fake_simulator, memory(), "penalty")
  times, devs = ev.evaluate(np.array([[0, 0, 0, 0], [1, 0, 0, 0]]))
  np.testing.assert_array_equal(times, [np.inf, 2.0])
  assert ev.num_evaluations == 2 and ev.num_repaired == 0


def test_repair_resimulates_only_the_infeasible_rows():
  ev = PlacementEvaluator(fake_simulator, memory(), "repair")
  times, devs = ev.evaluate(np.array([[0, 0, 0, 0], [1, 0, 0, 0]]))
  np.testing.assert_array_equal(times, [2.0, 2.0])
  np.testing.assert_array_equal(devs, [[1, 0, 0, 0], [1, 0, 0, 0]])
  # The repaired row equals the second sample: taken from the memo.
  assert ev.num_evaluations == 2 and ev.num_memo_hits == 1
  assert ev.num_repaired == 1


def test_unknown_rule():
  with pytest.raises(PlacementError, match="memory rule"):
    PlacementEvaluator(fake_simulator, memory(), "ignore")


def test_a_placement_is_simulated_once():
  calls = []

  def counting(devices):
    calls.append(len(devices))
    return fake_simulator(devices)

  ev = PlacementEvaluator(counting, memory(), "penalty")
  batch = np.array([[1, 0, 0, 0], [1, 0, 0, 0], [1, 1, 0, 0]])
  times, _ = ev.evaluate(batch)
  np.testing.assert_array_equal(times, [2.0, 2.0, 3.0])
  times, _ = ev.evaluate(batch[::-1])
  np.testing.assert_array_equal(times, [3.0, 2.0, 2.0])
  assert calls == [2] and ev.num_evaluations == 2 and ev.num_memo_hits == 4
