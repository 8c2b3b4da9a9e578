"""Simulates batches of group placements, with the memory rule.

A sampled placement can exceed a device's memory (the simulator then returns
an infinite step time). Two rules, selected by name:

  * ``penalty``: keep the infinite step time; the reward shaping turns it
    into a penalty (`rewards.penalized_step_times`).
  * ``repair``: move groups off the devices that are too full, then simulate
    again. The rule: each device's load is the `MemoryBudget` estimate (the
    sum of its groups' parameter and output bytes). While a device's load is
    above `fill` times its memory, its largest group moves to the allowed
    device with the most free memory (relative to its size) that can take
    it. Only infeasible samples are repaired, and each at most once; if the
    repaired placement is still infeasible it keeps the penalty. The agent
    is credited with the repaired placement's reward for the action it
    sampled.

Counts every simulated placement (`num_evaluations`), repairs included.
"""

import dataclasses
import enum
from typing import Callable, Tuple

import numpy as np

from tfplace.errors import PlacementError


class MemoryRule(str, enum.Enum):
  """What happens to a sampled placement that does not fit in memory."""
  PENALTY = "penalty"
  REPAIR = "repair"


@dataclasses.dataclass(frozen=True)
class GroupMemory:
  """Memory of colocation groups and devices, for the repair rule.

  Attributes:
    group_bytes: float64 [G], bytes each group charges its device
      (`tfplace.grouping.memory.MemoryBudget.need`).
    capacity_bytes: float64 [D], each device's memory.
    allowed: bool [G, D], where each group may go (kernel and memory).
  """
  group_bytes: np.ndarray
  capacity_bytes: np.ndarray
  allowed: np.ndarray


def repair(devices: np.ndarray, memory: GroupMemory,
           fill: float = 0.9) -> np.ndarray:
  """One placement [G] with groups moved off devices loaded above `fill`.

  See the module docstring for the rule. Returns a new array; groups only
  move to allowed devices, and nothing moves when no device has room.
  """
  out = np.array(devices, dtype=np.int32, copy=True)
  sizes = memory.group_bytes.astype(np.float64)
  cap = memory.capacity_bytes * fill
  load = np.bincount(out, weights=sizes, minlength=len(cap))
  for dev in np.argsort(-(load / cap)):
    if load[dev] <= cap[dev]:
      continue
    members = np.flatnonzero(out == dev)
    for group in members[np.argsort(-sizes[members], kind="stable")]:
      if load[dev] <= cap[dev]:
        break
      room = np.where(memory.allowed[group], cap - load - sizes[group], -np.inf)
      room[dev] = -np.inf
      target = int(np.argmax(room))
      if room[target] < 0:
        continue
      out[group] = target
      load[dev] -= sizes[group]
      load[target] += sizes[group]
  return out


class PlacementEvaluator:
  """Step times of batches of placements (device per colocation group).

  Attributes:
    simulate: the function every evaluation goes through (a search may wrap
      it, e.g. with `SearchRun.evaluate`, to keep the best-so-far).
    num_evaluations: placements simulated so far, repairs included.
    num_repaired: infeasible samples the repair rule made feasible.
  """

  def __init__(self, simulate_groups: Callable[[np.ndarray], np.ndarray],
               memory: GroupMemory, rule: str = MemoryRule.PENALTY.value):
    """Builds the evaluator.

    Args:
      simulate_groups: int [B, G] device per group -> float64 [B] step times
        (inf = infeasible); e.g. `PlacementProblem.simulate_groups`.
      memory: group and device memory, for the repair rule.
      rule: a `MemoryRule` name.
    """
    valid = [r.value for r in MemoryRule]
    if rule not in valid:
      raise PlacementError(f"unknown memory rule {rule!r}; choose one of "
                           f"{valid}")
    self.simulate = simulate_groups
    self.memory = memory
    self.rule = rule
    self.num_evaluations = 0
    self.num_repaired = 0

  def evaluate(self, devices: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Simulates `devices` [B, G].

    Returns:
      (step times float64 [B], the placements simulated last [B, G]: the
      repaired ones where the repair rule changed a sample).
    """
    devices = np.ascontiguousarray(devices, dtype=np.int32)
    times = np.asarray(self.simulate(devices), dtype=np.float64)
    self.num_evaluations += len(devices)
    bad = np.flatnonzero(~np.isfinite(times))
    if self.rule != MemoryRule.REPAIR.value or not len(bad):
      return times, devices
    fixed = np.stack([repair(devices[i], self.memory) for i in bad])
    changed = np.any(fixed != devices[bad], axis=1)
    if changed.any():
      rows = bad[changed]
      new_times = np.asarray(self.simulate(fixed[changed]), dtype=np.float64)
      self.num_evaluations += len(rows)
      self.num_repaired += int(np.isfinite(new_times).sum())
      devices = devices.copy()
      devices[rows] = fixed[changed]
      times = times.copy()
      times[rows] = new_times
    return times, devices
