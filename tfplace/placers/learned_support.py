"""What search and learned placers share: budget, best-so-far, start.

  * `Budget`: wall-clock seconds and/or simulator evaluations.
  * `SearchRun`: a context manager between a search and its evaluator: it
    counts evaluations, keeps the best feasible placement and its history,
    shows a tqdm bar with the best step time, and turns Ctrl-C into
    `done()` (the search stops and returns the best so far; a second Ctrl-C
    raises KeyboardInterrupt). The interrupt is recorded in
    `tfplace.interrupts`, so the program's outputs are not written; a search
    saves its own best-so-far inside `interrupts.writes_allowed()`.
  * `start_placement`: where a search starts: "best_heuristic" (every
    heuristic placer, the fastest feasible placement), a placer's name, or a
    placement JSON file.

(The minimum the learned placers need, written by the RL work while the
search placers' version was not on main; same names and signatures, so the
fuller version replaces it.)
"""

import dataclasses
import math
import os
import signal
import threading
import time
from typing import Callable, List, Optional, Tuple

import numpy as np
from absl import logging
from tqdm.auto import tqdm

from tfplace import interrupts
from tfplace.errors import PlacementError

Evaluator = Callable[[np.ndarray], np.ndarray]


@dataclasses.dataclass(frozen=True)
class Budget:
  """How much a search may spend; it stops at whichever limit comes first.

  Attributes:
    seconds: wall-clock seconds, or None for no time limit.
    evaluations: simulator evaluations, or None for no limit.
  """
  seconds: Optional[float] = 60.0
  evaluations: Optional[int] = None

  def __post_init__(self):
    if self.seconds is None and self.evaluations is None:
      raise PlacementError("a search budget needs seconds or evaluations")
    if self.seconds is not None and not (math.isfinite(self.seconds)
                                         and self.seconds > 0):
      raise PlacementError(f"the search budget must be a positive number of "
                           f"seconds, got {self.seconds!r}")
    if self.evaluations is not None and self.evaluations < 1:
      raise PlacementError(f"the search budget must be a positive number of "
                           f"evaluations, got {self.evaluations!r}")


@dataclasses.dataclass(frozen=True)
class SearchPoint:
  """The best step time after some evaluations (one point of a curve)."""
  evaluations: int
  seconds: float
  best_step_time_s: float


class SearchRun:
  """Budget, best-so-far, progress bar and Ctrl-C for one search."""

  def __init__(self, evaluate: Evaluator, budget: Budget, start: np.ndarray,
               start_step_time_s: Optional[float] = None,
               desc: str = "search", progress: bool = True):
    """Args:
      evaluate: group devices int [B, G] -> step times float [B].
      budget: when to stop.
      start: int [G], the start placement (the best until a better one).
      start_step_time_s: its step time if known (else evaluated on entry).
      desc: the progress bar's label.
      progress: show a tqdm bar.
    """
    self._evaluate, self.budget = evaluate, budget
    self._start = np.asarray(start, dtype=np.int32).copy()
    self._start_time = start_step_time_s
    self._desc, self._progress = desc, progress
    self.best_devices = self._start.copy()
    self.best_step_time_s = math.inf
    self.evaluations = 0
    self.history: List[SearchPoint] = []
    self.interrupted = False
    self._t0: Optional[float] = None
    self._bar = None
    self._previous_handler = None

  def __enter__(self) -> "SearchRun":
    self._t0 = time.perf_counter()
    if threading.current_thread() is threading.main_thread():
      self._previous_handler = signal.signal(signal.SIGINT, self._on_sigint)
    self._bar = tqdm(total=self.budget.evaluations, desc=self._desc,
                     unit="eval", disable=not self._progress, leave=False)
    if self._start_time is None:
      self._start_time = float(self.evaluate(self._start[None])[0])
    else:
      self._offer(self._start[None], np.array([self._start_time]))
    return self

  def __exit__(self, *exc) -> None:
    self._bar.close()
    if self._previous_handler is not None:
      signal.signal(signal.SIGINT, self._previous_handler)
      self._previous_handler = None

  def _on_sigint(self, signum, frame) -> None:
    del signum, frame
    if self.interrupted:
      raise KeyboardInterrupt
    self.interrupted = True
    interrupts.note_interrupt()  # Outputs after this need writes_allowed().
    logging.warning("%s: interrupted; stopping with the best placement so "
                    "far (Ctrl-C again to abort)", self._desc)

  @property
  def elapsed_s(self) -> float:
    return 0.0 if self._t0 is None else time.perf_counter() - self._t0

  def done(self) -> bool:
    """True when the budget is spent or Ctrl-C asked to stop."""
    budget = self.budget
    return (self.interrupted or (budget.evaluations is not None and
                                 self.evaluations >= budget.evaluations)
            or (budget.seconds is not None and
                self.elapsed_s >= budget.seconds))

  def evaluate(self, candidates: np.ndarray) -> np.ndarray:
    """Step times of `candidates` [B, G]; keeps the best feasible one."""
    candidates = np.atleast_2d(np.asarray(candidates, dtype=np.int32))
    times = np.asarray(self._evaluate(candidates), dtype=np.float64)
    self._offer(candidates, times)
    return times

  def _offer(self, candidates: np.ndarray, times: np.ndarray) -> None:
    self.evaluations += len(times)
    if len(times):
      i = int(np.argmin(times))
      if math.isfinite(times[i]) and times[i] < self.best_step_time_s:
        self.best_step_time_s = float(times[i])
        self.best_devices = candidates[i].copy()
        self.history.append(SearchPoint(self.evaluations, self.elapsed_s,
                                        self.best_step_time_s))
        self._bar.set_postfix_str(f"best {self.best_step_time_s * 1e3:.2f} ms")
    self._bar.update(len(times))


@dataclasses.dataclass(frozen=True)
class StartPlacement:
  """Where a search starts.

  Attributes:
    group_devices: int32 [G], a device per colocation group.
    step_time_s: its simulated step time (inf if infeasible).
    source: the placer or file it came from.
  """
  group_devices: np.ndarray
  step_time_s: float
  source: str


def _start_from(problem, placement, source: str) -> StartPlacement:
  placement.validate(problem.graph, problem.cluster)
  ops = placement.to_array(problem.graph, problem.cluster)
  devices = np.array([ops[m[0]] for m in problem.groups.members], np.int32)
  return StartPlacement(devices,
                        float(problem.simulate_groups(devices[None])[0]),
                        source)


def start_placement(problem, init: str,
                    seed: Optional[int] = None) -> StartPlacement:
  """Resolves `init` ("best_heuristic", a placer name or a placement JSON).

  Raises:
    PlacementError: unknown placer, unreadable file, or (best heuristic)
      no heuristic could place the graph.
  """
  from tfplace.placement import Placement
  from tfplace.placers import registry
  from tfplace.placers.base import PlacerKind
  if init == "best_heuristic":
    runs: List[Tuple[float, StartPlacement]] = []
    for name in registry.list_placers(PlacerKind.HEURISTIC):
      try:
        start = _start_from(problem, registry.get_placer(name).place(
            problem, seed=seed), name)
      except (PlacementError, AssertionError, ValueError, RuntimeError) as e:
        logging.warning("start placement: %s failed: %s", name, e)
        continue
      runs.append((start.step_time_s, start))
    if not runs:
      raise PlacementError("no heuristic placer could place this graph")
    best = min(runs, key=lambda r: r[0])[1]
    return dataclasses.replace(
        best, source=f"{best.source} (best of {len(runs)} heuristics)")
  if init in registry.list_placers():
    return _start_from(problem, registry.get_placer(init).place(
        problem, seed=seed), init)
  if init.endswith(".json") or os.path.exists(init):
    return _start_from(problem, Placement.load(init), f"file {init}")
  raise PlacementError(f"init must be best_heuristic, a placer name or a "
                       f"placement JSON file; got {init!r}")
