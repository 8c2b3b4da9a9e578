"""The cross-entropy method: sampling, updates and a hand-worked optimum."""

import numpy as np

from tfplace.placers.cross_entropy import (CrossEntropyConfig, cross_entropy,
                                           initial_distribution, sample,
                                           update)
from tfplace.placers.search_support import Budget
import search_testlib as lib


def test_initial_distribution_favours_the_start_and_respects_allowed():
  allowed = np.array([[True, True, True], [True, False, False]])
  p = initial_distribution(allowed, np.array([1, 0]), 0.8)
  np.testing.assert_allclose(p, [[0.1, 0.8, 0.1], [1.0, 0.0, 0.0]])
  draws = sample(p, 2000, np.random.default_rng(0))
  assert (draws[:, 1] == 0).all()
  assert abs((draws[:, 0] == 1).mean() - 0.8) < 0.03


def test_update_moves_towards_the_elite_with_a_floor():
  allowed = np.array([[True, True], [True, True]])
  p = np.full((2, 2), 0.5)
  elite = np.array([[1, 0], [1, 0]])
  q = update(p, elite, allowed, CrossEntropyConfig(smoothing=0.5, floor=0.0))
  np.testing.assert_allclose(q, [[0.25, 0.75], [0.75, 0.25]])


def test_finds_the_balanced_placement():
  space, _, _ = lib.space(*lib.independent_ops(4))
  result = cross_entropy(space, np.zeros(4, np.int32),
                         Budget(seconds=None, evaluations=400),
                         CrossEntropyConfig(batch_size=16, start_mass=0.5),
                         seed=0, progress=False)
  assert result.step_time_s == 2.0
  assert result.extra["rounds"] > 0


def test_never_reports_an_infeasible_placement():
  graph, costs = lib.independent_ops(4, param_bytes=100)
  space, sim, _ = lib.space(graph, costs, memory_bytes=250)
  result = cross_entropy(space, np.array([0, 0, 1, 1], np.int32),
                         Budget(seconds=None, evaluations=200),
                         CrossEntropyConfig(batch_size=16, start_mass=0.3),
                         seed=1, progress=False)
  assert result.step_time_s == 2.0
  assert sim.simulate(result.group_devices).feasible
