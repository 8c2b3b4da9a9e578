"""Reward shaping on numbers worked out by hand."""

import numpy as np
import pytest

from tfplace.errors import PlacementError
from tfplace.rl.environments.rewards import RewardConfig, rewards


def test_relative_is_zero_at_the_reference_and_the_fraction_saved():
  r = rewards(np.array([2.0, 1.0, 3.0]), 2.0, RewardConfig("relative"))
  np.testing.assert_allclose(r, [0.0, 0.5, -0.5])


def test_neg_sqrt():
  r = rewards(np.array([4.0, 0.25]), 1.0, RewardConfig("neg_sqrt"))
  np.testing.assert_allclose(r, [-2.0, -0.5])


def test_infeasible_ranks_below_every_feasible_sample():
  # Penalty: 2 x max(reference 1.0, slowest feasible 3.0) = 6 s.
  r = rewards(np.array([np.inf, 3.0]), 1.0, RewardConfig("relative", 2.0))
  np.testing.assert_allclose(r, [1 - 6.0, 1 - 3.0])
  r = rewards(np.array([np.inf]), 1.0, RewardConfig("neg_sqrt", 4.0))
  np.testing.assert_allclose(r, [-2.0])


def test_bad_config():
  with pytest.raises(PlacementError, match="unknown reward shaping"):
    RewardConfig("log")
  with pytest.raises(PlacementError, match="positive"):
    rewards(np.array([1.0]), np.inf, RewardConfig())
