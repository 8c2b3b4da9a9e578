"""Reward shaping: simulated step times -> rewards.

Two shapings, selected by name:

  * ``neg_sqrt``: r = -sqrt(step time in seconds), the hierarchical planner's
    reward (Mirhoseini et al., ICLR 2018). Its scale depends on the graph.
  * ``relative``: r = 1 - step time / reference step time, where the
    reference is the start placement's step time (the best heuristic's).
    0 at the reference, 0.1 for a placement 10 % faster; comparable across
    graphs and clusters.

An infeasible placement (out of memory after the memory rule) gets the reward
of a step time `penalty_factor` times the larger of the reference and the
slowest feasible step time in the same batch, so it always ranks below every
feasible sample.
"""

import dataclasses
import enum

import numpy as np

from tfplace.errors import PlacementError


class RewardShaping(str, enum.Enum):
  """How step times become rewards (see the module docstring)."""
  NEG_SQRT = "neg_sqrt"
  RELATIVE = "relative"


@dataclasses.dataclass(frozen=True)
class RewardConfig:
  """Reward shaping.

  Attributes:
    shaping: a `RewardShaping` name: "relative" or "neg_sqrt".
    penalty_factor: infeasible placements score as this many times the
      larger of the reference and the batch's slowest feasible step time.
  """
  shaping: str = RewardShaping.RELATIVE.value
  penalty_factor: float = 2.0

  def __post_init__(self):
    valid = [s.value for s in RewardShaping]
    if self.shaping not in valid:
      raise PlacementError(f"unknown reward shaping {self.shaping!r}; "
                           f"choose one of {valid}")
    if not self.penalty_factor >= 1.0:
      raise PlacementError(
          f"penalty_factor must be >= 1, got {self.penalty_factor}")


def penalized_step_times(step_times: np.ndarray, reference_s: float,
                         penalty_factor: float) -> np.ndarray:
  """`step_times` with inf replaced by the penalty step time."""
  t = np.asarray(step_times, dtype=np.float64)
  finite = np.isfinite(t)
  worst = max(reference_s, float(t[finite].max()) if finite.any() else 0.0)
  return np.where(finite, t, penalty_factor * worst)


def rewards(step_times: np.ndarray, reference_s: float,
            config: RewardConfig) -> np.ndarray:
  """float32 rewards for `step_times` (seconds, inf = infeasible).

  Args:
    step_times: float [B] simulated step times.
    reference_s: the reference step time (finite, > 0).
    config: the shaping.

  Returns:
    float32 [B].
  """
  if not (np.isfinite(reference_s) and reference_s > 0):
    raise PlacementError(f"reference step time must be positive and finite, "
                         f"got {reference_s}")
  t = penalized_step_times(step_times, reference_s, config.penalty_factor)
  if config.shaping == RewardShaping.NEG_SQRT.value:
    return (-np.sqrt(t)).astype(np.float32)
  return (1.0 - t / reference_s).astype(np.float32)
