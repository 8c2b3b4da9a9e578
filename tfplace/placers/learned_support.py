"""What search and learned placers share: budget, best-so-far, start.

  * `Budget`: a wall-time and a sample budget; says which one ran out.
  * `BestSoFar`: the fastest feasible group placement seen, with its history
    (samples -> step time at each improvement).
  * `start_placement`: where a search starts: "best_heuristic" (every
    heuristic placer on the problem, the fastest feasible one), a placer's
    name, or a placement JSON file.

(The minimum the learned placers need, written by the RL work while the
search placers' fuller version was not on main yet; same names.)
"""

import dataclasses
import math
import os
from typing import List, Optional, Tuple

import numpy as np
from absl import logging

from tfplace.errors import PlacementError
from tfplace.placement import Placement

BEST_HEURISTIC = "best_heuristic"


@dataclasses.dataclass(frozen=True)
class Budget:
  """A wall-time and a sample budget.

  Attributes:
    time_s: seconds.
    max_samples: placements evaluated.
  """
  time_s: float
  max_samples: int

  def __post_init__(self):
    if not self.time_s > 0 or self.max_samples < 1:
      raise PlacementError(f"the budget needs time_s > 0 and max_samples >= 1,"
                           f" got {self.time_s} s and {self.max_samples}")

  def exhausted(self, elapsed_s: float, samples: int) -> Optional[str]:
    """"time_s" or "max_samples" when that budget is spent, else None."""
    if elapsed_s >= self.time_s:
      return "time_s"
    if samples >= self.max_samples:
      return "max_samples"
    return None


class BestSoFar:
  """The fastest feasible group placement seen, and when it was found."""

  def __init__(self):
    self.devices: Optional[np.ndarray] = None
    self.step_time_s = math.inf
    self.history: List[Tuple[int, float]] = []

  def offer(self, devices: np.ndarray, step_times: np.ndarray,
            samples: int = 0) -> bool:
    """Keeps the fastest feasible row of `devices` [B, G] if it is better.

    Args:
      devices: group placements.
      step_times: their step times (inf = infeasible).
      samples: samples drawn so far (for the history).

    Returns:
      True if the best changed.
    """
    times = np.asarray(step_times, dtype=np.float64)
    if not len(times) or not np.isfinite(times).any():
      return False
    i = int(np.argmin(np.where(np.isfinite(times), times, np.inf)))
    if not times[i] < self.step_time_s:
      return False
    self.devices = np.array(np.atleast_2d(devices)[i], dtype=np.int32)
    self.step_time_s = float(times[i])
    self.history.append((int(samples), self.step_time_s))
    return True


@dataclasses.dataclass(frozen=True)
class StartPlacement:
  """Where a search starts.

  Attributes:
    devices: int32 [G], device per colocation group.
    step_time_s: its simulated step time (inf if it does not fit).
    source: the placer name or file it came from.
  """
  devices: np.ndarray
  step_time_s: float
  source: str


def group_devices(problem, placement: Placement) -> np.ndarray:
  """int32 [G]: the device of each colocation group in `placement`."""
  placement.validate(problem.graph, problem.cluster)
  ids = placement.to_array(problem.graph, problem.cluster)
  first = np.array([m[0] for m in problem.groups.members], dtype=np.int64)
  return ids[first].astype(np.int32)


def _from_placer(problem, name: str, seed: Optional[int]) -> StartPlacement:
  from tfplace.placers.registry import get_placer
  devices = group_devices(problem, get_placer(name).place(problem, seed=seed))
  return StartPlacement(devices, float(problem.simulate_groups(devices)[0]),
                        name)


def start_placement(problem, start: str = BEST_HEURISTIC,
                    seed: Optional[int] = None) -> StartPlacement:
  """The start placement named by `start` (see the module docstring).

  Raises:
    PlacementError: unknown placer, unreadable file, or (best heuristic)
      no heuristic placement fits in memory.
  """
  if start != BEST_HEURISTIC:
    if os.path.exists(start) or start.endswith(".json"):
      devices = group_devices(problem, Placement.load(start))
      return StartPlacement(devices,
                            float(problem.simulate_groups(devices)[0]), start)
    return _from_placer(problem, start, seed)
  from tfplace.placers.base import PlacerKind
  from tfplace.placers.registry import list_placers
  best = None
  for name in list_placers(PlacerKind.HEURISTIC):
    try:
      candidate = _from_placer(problem, name, seed)
    except PlacementError as e:
      logging.info("start: %s failed: %s", name, e)
      continue
    logging.info("start: %s %.6g s", name, candidate.step_time_s)
    if best is None or candidate.step_time_s < best.step_time_s:
      best = candidate
  if best is None or not math.isfinite(best.step_time_s):
    raise PlacementError("no heuristic placement fits in memory: nothing to "
                         "start a search from")
  return best
