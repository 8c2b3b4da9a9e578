"""Step times measured on a target, as a search's evaluator.

`MeasuredEvaluator` is what a search calls instead of the simulator: group
devices int [B, G] (colocation groups) -> step times float [B]. It plugs
into `SearchRun` (`local_search`, `cross_entropy`) and into the learned
placers' evaluator, unchanged.

Each call measures the batch's new placements between two measurements of
a reference placement (the search's start): [reference, p1, ..., pB,
reference]. A placement's figure is its median step over the mean of the
two reference medians around it, times the reference's first median (the
scale): so the search sees seconds, and machine drift between batches
cancels. A placement seen before in this run is not measured again (its
ratio is remembered); with `cache_dir` its timing is also kept on disk by
`measure_batch`. A placement that fails (an error, a timeout: a per-step
deadline of `timeout_factor` reference steps) gets `failure_penalty` times
the reference's time: a penalty, not a crash. A dead worker ends the search
(`StopSearch`) with the best so far kept.

A placement that measures faster than the best so far (the incumbent of a
greedy search) is confirmed before it is reported: it is measured against
the incumbent in `confirm_rounds` fresh pairs (order alternating), and its
figure becomes the incumbent's times the median ratio. So a search accepts
a move on a paired comparison with what it would replace, not on one
lucky figure that every later candidate then has to beat (the winner's
curse of greedy acceptance on noisy times; WORKSPACE_NOTES.md, issue 11).
"""

import dataclasses
import math
import time
from typing import Dict, List, Optional, Tuple

import numpy as np
from absl import logging

from tfplace.errors import MeasureError
from tfplace.measurement.batch import measure_batch
from tfplace.measurement.config import MeasureConfig
from tfplace.measurement.feeds import resolve_inputs
from tfplace.placers.problem import PlacementProblem
from tfplace.placers.search_support import StopSearch
from tfplace.real.target import Target


@dataclasses.dataclass(frozen=True)
class MeasuredSettings:
  """How placements are measured as a search's reward.

  Attributes:
    measure: warmup and timed steps per placement (deadlines are set from
      the reference's step time).
    failure_penalty: a failed placement's time, in reference times.
    timeout_factor: per-step deadline, in reference step times (at least
      `min_step_timeout_s`).
    min_step_timeout_s: the shortest per-step deadline.
    cache_dir: `measure_batch` cache of the candidates' timings (None: in
      memory only, for this run).
    confirm_rounds: fresh pairs (placement, incumbent) that confirm a
      placement measured faster than the best so far (0: none, its first
      figure is reported).
  """
  measure: MeasureConfig = MeasureConfig(warmup=1, steps=4)
  failure_penalty: float = 2.0
  timeout_factor: float = 20.0
  min_step_timeout_s: float = 5.0
  cache_dir: Optional[str] = None
  confirm_rounds: int = 2

  def __post_init__(self):
    if self.confirm_rounds < 0:
      raise MeasureError(f"confirm_rounds must be >= 0, got "
                         f"{self.confirm_rounds}")


@dataclasses.dataclass
class MeasuredStats:
  """What the evaluator did: placements measured, remembered, failed,
  confirmations (and how many of them the incumbent won), and every
  reference median (the machine's drift)."""
  measured: int = 0
  remembered: int = 0
  confirmed: int = 0
  rejected: int = 0
  failed: List[Tuple[int, str]] = dataclasses.field(default_factory=list)
  reference_s: List[float] = dataclasses.field(default_factory=list)


class MeasuredEvaluator:
  """Group devices [B, G] -> measured step times [B] (see the docstring)."""

  def __init__(self, problem: PlacementProblem, target: Target,
               reference: np.ndarray,
               settings: Optional[MeasuredSettings] = None, feeds=None,
               feed_options=None):
    """Measures the reference once (the scale).

    Args:
      problem: the graph, cluster and colocation groups.
      target: where to measure (checked already).
      reference: int [G], the reference placement (the search's start).
      settings: steps, penalty, deadlines, cache.
      feeds, feed_options: the graph's inputs (see `tfplace.measure`).

    Raises:
      MeasureError: the reference cannot be measured.
    """
    self.problem, self.target = problem, target
    self.settings = settings or MeasuredSettings()
    self.reference = np.asarray(reference, dtype=np.int32).copy()
    self._ref_placement = problem.placement(self.reference)
    self._inputs = resolve_inputs(problem.graph, feeds, feed_options)
    self._config = target.measure_config(self.settings.measure)
    self._ratios: Dict[bytes, float] = {self.reference.tobytes(): 1.0}
    self._best_ratio, self._best_row = 1.0, self.reference
    self.stats = MeasuredStats()
    t0 = time.perf_counter()
    first = self._reference_median()
    self.seconds_per_measurement = time.perf_counter() - t0
    if first is None:
      raise MeasureError(f"the reference placement could not be measured "
                         f"on {target.description}: "
                         f"{self.stats.failed[-1][1]}")
    self.reference_s = first
    step_timeout = max(self.settings.min_step_timeout_s,
                       self.settings.timeout_factor * first)
    self._config = self._config.replace(
        step_timeout_s=step_timeout,
        timeout_s=max(30.0, step_timeout * (self._config.warmup
                                            + self._config.steps + 4)))

  def __call__(self, candidates: np.ndarray) -> np.ndarray:
    candidates = np.atleast_2d(np.asarray(candidates, dtype=np.int32))
    keys = [row.tobytes() for row in candidates]
    first = {}  # each new placement once
    for i, k in enumerate(keys):
      if k not in self._ratios:
        first.setdefault(k, i)
    new = list(first.values())
    self.stats.remembered += len(keys) - len(new)
    if new:
      self._measure_new(candidates, keys, new)
    return np.array([self._ratios[k] for k in keys]) * self.reference_s

  def ratio(self, group_devices: np.ndarray) -> Optional[float]:
    """The remembered time / reference ratio of a placement, or None."""
    return self._ratios.get(np.asarray(group_devices, np.int32).tobytes())

  def _measure_new(self, candidates, keys, new) -> None:
    before = self._reference_median()
    times = [self._median(self.problem.placement(candidates[i]), i)
             for i in new]
    after = self._reference_median()
    refs = [t for t in (before, after) if t is not None]
    if not refs:
      self._stop_if_dead()
      raise StopSearch(f"the reference placement failed on "
                       f"{self.target.description}: "
                       f"{self.stats.failed[-1][1]}")
    scale = float(np.mean(refs))
    penalty = self.settings.failure_penalty
    for i, t in zip(new, times):
      self._ratios[keys[i]] = penalty if t is None else t / scale
    if any(t is None for t in times):
      self._stop_if_dead()
    for i in sorted(new, key=lambda i: self._ratios[keys[i]]):
      if self._ratios[keys[i]] >= self._best_ratio:
        continue
      if self.settings.confirm_rounds:
        self._ratios[keys[i]] = self._confirmed(candidates[i])
      if self._ratios[keys[i]] < self._best_ratio:
        self._best_ratio = self._ratios[keys[i]]
        self._best_row = candidates[i].copy()  # The search may reuse it.

  def _confirmed(self, row: np.ndarray) -> float:
    """The ratio of a placement measured faster than the incumbent: the
    incumbent's ratio times their median ratio over fresh pairs (the
    incumbent's ratio: the pairs failed)."""
    pair = (self.problem.placement(row),
            self.problem.placement(self._best_row))
    ratios = []
    for r in range(self.settings.confirm_rounds):
      order = (0, 1) if r % 2 == 0 else (1, 0)
      t = {k: self._median(pair[k], -1, cache=False) for k in order}
      if t[0] is None or t[1] is None:
        self._stop_if_dead()
      else:
        ratios.append(t[0] / t[1])
    self.stats.confirmed += 1
    rho = float(np.median(ratios)) if ratios else 1.0
    self.stats.rejected += rho >= 1.0
    return self._best_ratio * rho

  def _reference_median(self) -> Optional[float]:
    t = self._median(self._ref_placement, -1, cache=False)
    if t is not None:
      self.stats.reference_s.append(t)
    return t

  def _median(self, placement, index: int, cache: bool = True
              ) -> Optional[float]:
    """One placement's median step (None: it failed)."""
    outcome = measure_batch(
        self.problem.graph, [placement], self._config, progress=False,
        feeds=self._inputs,
        cache_dir=self.settings.cache_dir if cache else None)[0]
    self.stats.measured += 0 if outcome.cached else 1
    if outcome.ok:
      return outcome.timing.median_step_time_s
    self.stats.failed.append((index, outcome.error))
    logging.warning("measured evaluator: placement failed: %s", outcome.error)
    return None

  def _stop_if_dead(self) -> None:
    dead = self.target.dead_workers()
    if dead:
      raise StopSearch(f"{'; '.join(map(str, dead))}: the worker died")


def drift(stats: MeasuredStats) -> float:
  """Spread of the reference's medians: max / min (1.0 with none)."""
  refs = [t for t in stats.reference_s if t > 0 and math.isfinite(t)]
  return max(refs) / min(refs) if refs else 1.0
