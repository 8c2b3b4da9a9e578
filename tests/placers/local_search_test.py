"""Local search finds hand-worked optima and never accepts infeasible moves."""

import numpy as np

from tfplace.placers.local_search import LocalSearchConfig, local_search
from tfplace.placers.search_support import Budget
import search_testlib as lib


def test_balances_independent_ops_over_two_devices():
  space, _, _ = lib.space(*lib.independent_ops(4))
  result = local_search(space, np.zeros(4, np.int32),
                        Budget(seconds=None, evaluations=300),
                        LocalSearchConfig(batch_size=8), seed=0,
                        progress=False)
  assert result.start_step_time_s == 4.0
  assert result.step_time_s == 2.0
  assert np.bincount(result.group_devices, minlength=2).tolist() == [2, 2]


def test_joins_a_split_chain_on_one_device():
  space, _, _ = lib.space(*lib.chain(4), bandwidth=1e9)
  start = np.array([0, 1, 0, 1], np.int32)  # 4 s of compute + 3 s moving.
  result = local_search(space, start, Budget(seconds=None, evaluations=400),
                        LocalSearchConfig(batch_size=8), seed=1,
                        progress=False)
  assert result.start_step_time_s == 7.0
  assert result.step_time_s == 4.0
  assert len(set(result.group_devices.tolist())) == 1


def test_memory_is_respected():
  # Each op holds 100 bytes of parameters; device memory is 250 bytes, so at
  # most two ops per device: the best feasible is 2 + 2 (not 4 + 0).
  graph, costs = lib.independent_ops(4, param_bytes=100)
  space, sim, _ = lib.space(graph, costs, memory_bytes=250)
  seen = []
  evaluate = space.evaluate

  def spy(candidates):
    times = evaluate(candidates)
    seen.extend(zip(candidates.tolist(), times.tolist()))
    return times

  space = lib.SearchSpace(space.groups, spy, space.capacity)
  start = np.array([0, 0, 1, 1], np.int32)
  result = local_search(space, start, Budget(seconds=None, evaluations=100),
                        LocalSearchConfig(batch_size=8, temperature=1.0),
                        seed=2, progress=False)
  assert result.step_time_s == 2.0
  assert np.bincount(result.group_devices, minlength=2).tolist() == [2, 2]
  # Candidates whose parameters overflow a device are not even simulated.
  assert all(max(np.bincount(c, minlength=2)) <= 2 for c, _ in seen)
  assert sim.simulate(result.group_devices).feasible


def test_a_batch_that_comes_out_empty_by_chance_does_not_end_the_search():
  # One block move per batch, to a random device: half of them leave the
  # placement as it is (an empty batch). The search goes on to its budget.
  space, _, _ = lib.space(*lib.independent_ops(4))
  config = LocalSearchConfig(batch_size=1, swap_fraction=0.0,
                             block_fraction=1.0)
  result = local_search(space, np.zeros(4, np.int32),
                        Budget(seconds=None, evaluations=40), config, seed=0,
                        progress=False, blocks=np.array([0, 0, 1, 1]))
  assert result.evaluations == 40


def test_a_search_told_to_end_when_stale_ends_before_its_budget():
  space, _, _ = lib.space(*lib.independent_ops(4))
  config = LocalSearchConfig(batch_size=8, patience=5)
  budget = Budget(seconds=None, evaluations=2000)
  ended = local_search(space, np.zeros(4, np.int32), budget, config, seed=0,
                       progress=False, end_when_stale=True)
  assert ended.step_time_s == 2.0
  last_gain = ended.history[-1].evaluations
  assert last_gain < ended.evaluations <= last_gain + 5 * 8
  full = local_search(space, np.zeros(4, np.int32), budget, config, seed=0,
                      progress=False)
  assert full.step_time_s == 2.0 and full.evaluations == 2000


def test_distinct_neighbours_keep_the_order_first_seen():
  from tfplace.placers.local_search import _distinct_rows
  rows = np.array([[2, 0, 1], [0, 1, 1], [2, 0, 1], [1, 1, 0], [0, 1, 1]],
                  np.int32)
  assert _distinct_rows(rows).tolist() == [[2, 0, 1], [0, 1, 1], [1, 1, 0]]
  # Every row hashed alike: the exact check falls back to np.unique.
  same = _distinct_rows(rows, weights=np.zeros(3, np.int64))
  assert sorted(same.tolist()) == [[0, 1, 1], [1, 1, 0], [2, 0, 1]]
