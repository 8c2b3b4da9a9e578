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

Placements already simulated (a sample equal to the incumbent, or to any
recent sample) are looked up in a memo instead of simulated again: the
simulator is deterministic, and a concentrated policy draws the same
placement often (with 2 units expected to change, e^-2 = 13.5 % of samples
are the incumbent itself). `num_evaluations` counts the simulator's
evaluations only, repairs included.
"""

import collections
import dataclasses
import enum
import hashlib
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
    num_memo_hits: samples answered from the memo (not simulated).
  """

  MEMO_SIZE = 100_000

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
    self.num_memo_hits = 0
    self._memo = collections.OrderedDict()

  def evaluate(self, devices: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Simulates `devices` [B, G].

    Returns:
      (step times float64 [B], the placements simulated last [B, G]: the
      repaired ones where the repair rule changed a sample).
    """
    devices = np.ascontiguousarray(devices, dtype=np.int32)
    times = self._simulate_new(devices)
    bad = np.flatnonzero(~np.isfinite(times))
    if self.rule != MemoryRule.REPAIR.value or not len(bad):
      return times, devices
    fixed = np.stack([repair(devices[i], self.memory) for i in bad])
    changed = np.any(fixed != devices[bad], axis=1)
    if changed.any():
      rows = bad[changed]
      new_times = self._simulate_new(fixed[changed])
      self.num_repaired += int(np.isfinite(new_times).sum())
      devices = devices.copy()
      devices[rows] = fixed[changed]
      times = times.copy()
      times[rows] = new_times
    return times, devices

  def _simulate_new(self, devices: np.ndarray) -> np.ndarray:
    """Step times of `devices` [B, G]: simulated once per distinct placement
    not in the memo."""
    keys = [hashlib.blake2b(row.tobytes(), digest_size=16).digest()
            for row in devices]
    times = np.empty(len(devices))
    todo = {}
    for i, key in enumerate(keys):
      if key in self._memo:
        self._memo.move_to_end(key)
        times[i] = self._memo[key]
        self.num_memo_hits += 1
      else:
        todo.setdefault(key, []).append(i)
    if todo:
      rows = [idx[0] for idx in todo.values()]
      new = np.asarray(self.simulate(devices[rows]), dtype=np.float64)
      self.num_evaluations += len(rows)
      for (key, idx), t in zip(todo.items(), new):
        times[idx] = t
        self._memo[key] = float(t)
        self.num_memo_hits += len(idx) - 1
      while len(self._memo) > self.MEMO_SIZE:
        self._memo.popitem(last=False)
    return times
