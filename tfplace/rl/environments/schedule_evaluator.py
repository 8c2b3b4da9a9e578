"""Simulates batches of unit placements, with when each unit starts.

Placeto's state includes, for every group, when it starts in the simulated
schedule of the current placement. `ScheduleEvaluator` turns a device per
unit into a device per colocation group, simulates the batch with one call
(`Simulator.simulate_batch_start_times`, or `simulate_batch` when the
schedule is not wanted) and reduces the op start times to one per unit: the
earliest start of its ops. Infeasible placements (no kernel, out of memory)
get an infinite step time and start times of 0.

Every simulation goes through the `simulate` attribute (group devices
[B, G] -> step times [B]), which a search may wrap (`SearchRun.evaluate`
keeps the best-so-far and the progress bar); the start times of the same
call are kept aside for `evaluate`. Placements already simulated are looked
up in a memo (the simulator is deterministic; episodes of a concentrated
policy often reach the same placement). `num_evaluations` counts the
simulator's evaluations only.
"""

import collections
import hashlib
from typing import Callable, Optional, Tuple

import numpy as np

from tfplace.rl.environments.codecs import UnitCodec

StartTimesFn = Callable[[np.ndarray], Tuple[np.ndarray, np.ndarray]]


class ScheduleEvaluator:
  """Step times and per-unit start times of batches of unit placements.

  Attributes:
    codec: unit -> colocation group devices.
    simulate: group devices int [B, G] -> step times float64 [B]; every
      simulation goes through it.
    num_evaluations: placements simulated.
    num_memo_hits: placements answered from the memo.
  """

  MEMO_SIZE = 20_000

  def __init__(self, codec: UnitCodec, op_group: np.ndarray,
               simulate_groups: Callable[[np.ndarray], np.ndarray],
               simulate_start_times: StartTimesFn):
    """Builds the evaluator.

    Args:
      codec: unit -> colocation group devices.
      op_group: int [M], the colocation group of each op.
      simulate_groups: int [B, G] -> float64 [B] step times (inf =
        infeasible), e.g. `PlacementProblem.simulate_groups`.
      simulate_start_times: int [B, G] -> (float64 [B] step times, float64
        [B, M] op start times).
    """
    self.codec = codec
    self._simulate_groups = simulate_groups
    self._simulate_starts = simulate_start_times
    self.simulate = self._simulate
    unit_of_op = codec.unit_of[np.asarray(op_group, np.int64)]
    self._op_order = np.argsort(unit_of_op, kind="stable")
    self._bounds = np.searchsorted(unit_of_op[self._op_order],
                                   np.arange(codec.num_units))
    self._with_starts = False
    self._starts: Optional[np.ndarray] = None
    self._memo = collections.OrderedDict()
    self.num_evaluations = 0
    self.num_memo_hits = 0

  def _simulate(self, devices: np.ndarray) -> np.ndarray:
    """Step times of group placements; sets aside unit start times."""
    if not self._with_starts:
      return np.asarray(self._simulate_groups(devices), np.float64)
    times, op_starts = self._simulate_starts(devices)
    self._starts = np.minimum.reduceat(op_starts[:, self._op_order],
                                       self._bounds, axis=1)
    return np.asarray(times, np.float64)

  def evaluate(self, unit_devices: np.ndarray, with_starts: bool
               ) -> Tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """Simulates `unit_devices` [B, U] (memo first).

    Returns:
      (step times float64 [B], device per colocation group int32 [B, G],
      start time of each unit float64 [B, U] or None without `with_starts`).
    """
    units = np.atleast_2d(np.asarray(unit_devices, np.int32))
    keys = [hashlib.blake2b(row.tobytes() + bytes([with_starts]),
                            digest_size=16).digest() for row in units]
    todo, seen = [], set()
    for i, key in enumerate(keys):
      if key not in self._memo and key not in seen:
        seen.add(key)
        todo.append(i)
    if todo:
      self._with_starts = with_starts
      times = self.simulate(self.codec.decode(units[todo]))
      self.num_evaluations += len(todo)
      for j, i in enumerate(todo):
        starts = self._starts[j].copy() if with_starts else None
        self._memo[keys[i]] = (float(times[j]), starts)
      while len(self._memo) > self.MEMO_SIZE:
        self._memo.popitem(last=False)
    self.num_memo_hits += len(units) - len(todo)
    for key in keys:
      self._memo.move_to_end(key)
    found = [self._memo[key] for key in keys]
    times = np.array([t for t, _ in found])
    starts = np.stack([s for _, s in found]) if with_starts else None
    return times, self.codec.decode(units), starts
