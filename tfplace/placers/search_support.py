"""What every search placer shares: budget, best-so-far, stopping, progress.

A search (local search, cross-entropy, the learned placers' loops) proposes
placements of G groups on D devices and asks an evaluator for their step
times. `SearchRun` sits between the two: it counts evaluations against a
`Budget`, keeps the best *feasible* placement (a finite step time; the
simulator gives inf for out of memory or a missing kernel) and its history,
shows a tqdm bar with the best step time, and turns Ctrl-C into a request to
stop: the search sees `run.done()` become True, returns, and the caller gets
the best placement found so far with `interrupted=True` (a second Ctrl-C
raises KeyboardInterrupt as usual).

    with SearchRun(evaluate, Budget(seconds=60), start, desc="local_search") as run:
      while not run.done():
        candidates = ...                       # int [B, G]
        times = run.evaluate(candidates)      # float [B]
    result = run.result()                      # SearchResult

A program that saves the result after an interrupt does so inside
`tfplace.interrupts.writes_allowed()` (the interrupt is noted, so the
program still ends with status 130).

An evaluator that can no longer evaluate (a real cluster whose worker died)
raises `StopSearch`: the run ends like an interrupted one, with the best so
far and the reason (`SearchResult.stop_reason`).

The run also keeps the `keep_top` best distinct feasible placements it saw
(`SearchResult.top`; distinct: different step times): a verification on
real runs (`tfplace.real.verify`) measures them, not only the best.

`start_placement` resolves the `init` option of the search and learned
placers: the best of the heuristic placers, one named placer, or a placement
file.
"""

import dataclasses
import math
import os
import signal
import threading
import time
from typing import Callable, Mapping, Optional, Tuple

import numpy as np
from absl import logging
from tqdm.auto import tqdm

from tfplace import interrupts
from tfplace.errors import PlacementError
from tfplace.grouping.group_graph import GroupGraph
from tfplace.placers.quiet_trials import collect_warnings, log_collected

Evaluator = Callable[[np.ndarray], np.ndarray]

# Distinct placements a SearchRun keeps besides the best (the most
# `tfplace place --verify_top_k` may ask for).
KEEP_TOP = 16


class StopSearch(Exception):
  """Raised by an evaluator to end the search (the message says why)."""


@dataclasses.dataclass(frozen=True, eq=False)
class SearchSpace:
  """What a search algorithm searches over.

  Attributes:
    groups: the (possibly coarsened) group graph; a placement is a device
      per group, int [G].
    evaluate: group devices int [B, G] -> step times float [B] (inf where
      infeasible: out of memory, no kernel).
    capacity: float [D], device memory bytes. Parameters stay resident all
      step, so a placement whose parameters exceed a device's memory cannot
      fit: `fits` rejects it without simulating it.
  """
  groups: GroupGraph
  evaluate: Evaluator
  capacity: np.ndarray

  @property
  def allowed(self) -> np.ndarray:
    """bool [G, D]: the devices each group can run on."""
    return self.groups.allowed

  def param_load(self, group_devices: np.ndarray) -> np.ndarray:
    """float [D]: parameter bytes per device of one placement [G]."""
    return np.bincount(group_devices, weights=self.groups.param_bytes,
                       minlength=len(self.capacity))

  def fits(self, candidates: np.ndarray) -> np.ndarray:
    """bool [B]: the parameters of each placement fit every device."""
    candidates = np.atleast_2d(candidates)
    d = len(self.capacity)
    rows = np.repeat(np.arange(len(candidates)), candidates.shape[1])
    load = np.bincount(rows * d + candidates.ravel(),
                       weights=np.tile(self.groups.param_bytes,
                                       len(candidates)),
                       minlength=len(candidates) * d).reshape(-1, d)
    return (load <= self.capacity[None, :]).all(axis=1)


@dataclasses.dataclass(frozen=True)
class Budget:
  """How much a search may spend; it stops at whichever limit comes first.

  Attributes:
    seconds: wall-clock seconds, or None for no time limit.
    evaluations: simulator evaluations (placements scored), or None.
  """
  seconds: Optional[float] = 60.0
  evaluations: Optional[int] = None

  def __post_init__(self):
    if self.seconds is None and self.evaluations is None:
      raise PlacementError("a search budget needs seconds or evaluations")
    if self.seconds is not None and not (
        isinstance(self.seconds, (int, float)) and self.seconds > 0
        and math.isfinite(self.seconds)):
      raise PlacementError(f"the search budget must be a positive number of "
                           f"seconds, got {self.seconds!r}")
    if self.evaluations is not None and not (
        isinstance(self.evaluations, (int, np.integer))
        and self.evaluations > 0):
      raise PlacementError(f"the search budget must be a positive number of "
                           f"evaluations, got {self.evaluations!r}")

  def share(self, fraction: float) -> "Budget":
    """`fraction` (in (0, 1]) of each limit, at least one evaluation."""
    return Budget(
        seconds=None if self.seconds is None else self.seconds * fraction,
        evaluations=None if self.evaluations is None else
        max(1, int(self.evaluations * fraction)))

  def left_after(self, spent: "SearchResult") -> Optional["Budget"]:
    """What is left after the search `spent` (None: nothing)."""
    seconds = evaluations = None
    if self.seconds is not None:
      seconds = self.seconds - spent.seconds
      if seconds <= 0:
        return None
    if self.evaluations is not None:
      evaluations = self.evaluations - spent.evaluations
      if evaluations <= 0:
        return None
    return Budget(seconds=seconds, evaluations=evaluations)


def budget_from_options(budget_s: Optional[float],
                        max_evaluations: Optional[int]) -> Budget:
  """The `Budget` of a search placer's options (0 evaluations = no limit).

  Raises:
    PlacementError: a budget of 0 or negative seconds, negative evaluations.
  """
  if max_evaluations is not None and max_evaluations < 0:
    raise PlacementError(f"max_evaluations must be >= 0 (0: no limit), got "
                         f"{max_evaluations}")
  return Budget(seconds=budget_s, evaluations=max_evaluations or None)


@dataclasses.dataclass(frozen=True)
class SearchPoint:
  """The best step time after some evaluations (one point of a curve)."""
  evaluations: int
  seconds: float
  best_step_time_s: float


@dataclasses.dataclass(frozen=True)
class SearchResult:
  """What a search found.

  Attributes:
    group_devices: int32 [G], the best feasible placement found (the start
      placement when nothing better, or nothing feasible, was found).
    step_time_s: its step time (inf if no feasible placement was seen).
    start_step_time_s: the start placement's step time.
    evaluations: placements evaluated.
    seconds: wall-clock seconds spent.
    history: the best step time each time it improved.
    interrupted: True if Ctrl-C stopped the search.
    extra: algorithm-specific figures (e.g. CP-SAT's bound and gap).
    top: the best distinct feasible placements seen, best first, as
      (group devices int32 [G], step time) pairs (at most `keep_top`).
    stop_reason: why the evaluator ended the search (`StopSearch`), or None.
  """
  group_devices: np.ndarray
  step_time_s: float
  start_step_time_s: float
  evaluations: int
  seconds: float
  history: Tuple[SearchPoint, ...]
  interrupted: bool = False
  extra: Mapping[str, object] = dataclasses.field(default_factory=dict)
  top: Tuple[Tuple[np.ndarray, float], ...] = ()
  stop_reason: Optional[str] = None

  @property
  def evaluations_per_s(self) -> float:
    return self.evaluations / self.seconds if self.seconds > 0 else 0.0

  def summary(self) -> dict:
    """JSON-ready figures for placement metadata and tables."""
    def number(x):
      return float(x) if math.isfinite(x) else None
    return {"step_time_s": number(self.step_time_s),
            "start_step_time_s": number(self.start_step_time_s),
            "evaluations": int(self.evaluations),
            "seconds": round(float(self.seconds), 3),
            "evaluations_per_s": round(self.evaluations_per_s, 1),
            "interrupted": bool(self.interrupted),
            **({"stop_reason": self.stop_reason} if self.stop_reason else {}),
            "history": [[p.evaluations, round(p.seconds, 3),
                         number(p.best_step_time_s)] for p in self.history],
            **dict(self.extra)}


def chain_results(first: SearchResult, second: SearchResult,
                  to_second: np.ndarray, **extra) -> SearchResult:
  """One result of two searches in a row: `first` over coarse groups, then
  `second` over finer groups, started from `first`'s best.

  Args:
    first: the first search's result.
    second: the second's (its start was `first`'s best, mapped).
    to_second: int [G of second]: the first's group of each of the second's
      groups (a first placement p maps to p[to_second]).
    **extra: figures for `SearchResult.extra` (over `second`'s).

  Returns:
    The best of both, with the evaluations, seconds and history of both (the
    second's shifted after the first's) and their top placements merged.
  """
  top = TopPlacements(KEEP_TOP)
  for devices, t in first.top:
    top.offer(devices[to_second][None, :], np.array([t]))
  for devices, t in second.top:
    top.offer(devices[None, :], np.array([t]))
  best, best_time = first.group_devices[to_second], first.step_time_s
  if second.step_time_s < best_time:
    best, best_time = second.group_devices, second.step_time_s
  later = tuple(
      SearchPoint(p.evaluations + first.evaluations, p.seconds + first.seconds,
                  p.best_step_time_s)
      for p in second.history if p.best_step_time_s < first.step_time_s)
  return SearchResult(
      group_devices=np.asarray(best, dtype=np.int32),
      step_time_s=best_time, start_step_time_s=first.start_step_time_s,
      evaluations=first.evaluations + second.evaluations,
      seconds=first.seconds + second.seconds,
      history=first.history + later,
      interrupted=first.interrupted or second.interrupted,
      extra={**dict(second.extra), **extra}, top=top.best(),
      stop_reason=first.stop_reason or second.stop_reason)


class SearchRun:
  """Budget, best-so-far, progress bar and Ctrl-C for one search.

  Use as a context manager (it installs the SIGINT handler and the bar on
  entry, removes them on exit).
  """

  def __init__(self, evaluate: Evaluator, budget: Budget,
               start: np.ndarray, start_step_time_s: Optional[float] = None,
               desc: str = "search", progress: bool = True,
               keep_top: int = KEEP_TOP):
    """Args:
      evaluate: group devices int [B, G] -> step times float [B].
      budget: when to stop.
      start: int [G], the start placement (the fallback result).
      start_step_time_s: its step time if known (else evaluated on entry,
        which counts as one evaluation).
      desc: the progress bar's label.
      progress: show a tqdm bar.
      keep_top: distinct feasible placements to keep (`SearchResult.top`).
    """
    self._evaluate, self.budget = evaluate, budget
    self._start = np.asarray(start, dtype=np.int32).copy()
    self._start_time = start_step_time_s
    self._desc, self._progress = desc, progress
    self.best_devices = self._start.copy()
    self.best_step_time_s = math.inf
    self.evaluations = 0
    self.history = []
    self.interrupted = False
    self.stop_reason = None
    self._top = TopPlacements(keep_top)
    self._t0 = None
    self._bar = None
    self._previous_handler = None

  # ---- context ---------------------------------------------------------------

  def __enter__(self) -> "SearchRun":
    self._t0 = time.perf_counter()
    self._install_handler()
    total = self.budget.evaluations
    self._bar = tqdm(total=total, desc=self._desc, unit="eval",
                     disable=not self._progress, leave=False, mininterval=0.5)
    if self._start_time is None:
      self._start_time = float(self.evaluate(self._start[None, :])[0])
    else:
      self._offer(self._start[None, :], np.array([self._start_time]))
    return self

  def __exit__(self, *exc) -> None:
    if self._bar is not None:
      self._bar.close()
    self._restore_handler()

  def _install_handler(self) -> None:
    if threading.current_thread() is not threading.main_thread():
      return  # Signals only reach the main thread; nothing to catch.

    def on_sigint(signum, frame):
      del signum, frame
      if self.interrupted:  # Second Ctrl-C: give up at once.
        raise KeyboardInterrupt
      self.interrupted = True
      interrupts.note_interrupt()  # The program still ends with status 130.
      logging.warning("%s: interrupted; stopping with the best placement so "
                      "far (Ctrl-C again to abort)", self._desc)
    self._previous_handler = signal.signal(signal.SIGINT, on_sigint)

  def _restore_handler(self) -> None:
    if self._previous_handler is not None:
      signal.signal(signal.SIGINT, self._previous_handler)
      self._previous_handler = None

  # ---- the search's interface ------------------------------------------------

  @property
  def elapsed_s(self) -> float:
    return 0.0 if self._t0 is None else time.perf_counter() - self._t0

  @property
  def start_step_time_s(self) -> float:
    return math.inf if self._start_time is None else self._start_time

  def remaining_evaluations(self) -> Optional[int]:
    """Evaluations left, or None without an evaluation limit."""
    if self.budget.evaluations is None:
      return None
    return max(0, self.budget.evaluations - self.evaluations)

  def done(self) -> bool:
    """True when the budget is spent, Ctrl-C asked to stop, or the evaluator
    stopped the search."""
    if self.interrupted or self.stop_reason:
      return True
    left = self.remaining_evaluations()
    if left is not None and left <= 0:
      return True
    return (self.budget.seconds is not None
            and self.elapsed_s >= self.budget.seconds)

  def batch_size(self, wanted: int) -> int:
    """`wanted`, cut to the evaluations left (at least 1)."""
    left = self.remaining_evaluations()
    return max(1, wanted if left is None else min(wanted, left))

  def evaluate(self, candidates: np.ndarray) -> np.ndarray:
    """Step times of `candidates` [B, G]; tracks the best feasible one."""
    candidates = np.atleast_2d(np.asarray(candidates, dtype=np.int32))
    try:
      times = np.asarray(self._evaluate(candidates), dtype=np.float64)
    except StopSearch as e:
      self.stop_reason = str(e) or "the evaluator stopped the search"
      logging.warning("%s: %s; stopping with the best placement so far",
                      self._desc, self.stop_reason)
      times = np.full(len(candidates), math.inf)
    self._offer(candidates, times)
    return times

  def _offer(self, candidates: np.ndarray, times: np.ndarray) -> None:
    self.evaluations += len(times)
    self._top.offer(candidates, times)
    best = int(np.argmin(times)) if len(times) else -1
    if best >= 0 and math.isfinite(times[best]) and (
        times[best] < self.best_step_time_s):
      self.best_step_time_s = float(times[best])
      self.best_devices = candidates[best].copy()
      self.history.append(SearchPoint(self.evaluations, self.elapsed_s,
                                      self.best_step_time_s))
      if self._bar is not None:
        self._bar.set_postfix_str(f"best {self.best_step_time_s * 1e3:.2f} ms")
    if self._bar is not None:
      self._bar.update(len(times))

  def result(self, **extra) -> SearchResult:
    """The best placement found, with the run's figures."""
    return SearchResult(
        group_devices=self.best_devices.copy(),
        step_time_s=self.best_step_time_s,
        start_step_time_s=self.start_step_time_s,
        evaluations=self.evaluations, seconds=self.elapsed_s,
        history=tuple(self.history), interrupted=self.interrupted,
        extra=extra, top=self._top.best(), stop_reason=self.stop_reason)


class TopPlacements:
  """The `k` fastest distinct feasible placements offered so far.

  Distinct means a different step time (to 5 significant digits):
  placements the evaluator cannot tell apart (they differ only in ops
  outside the training step, in symmetric ways, or by rounding) count as
  one, the first offered. Cheap on every batch: only rows faster than the
  k-th kept are looked at.
  """

  def __init__(self, k: int):
    self.k = max(0, int(k))
    self._kept = {}  # step time key -> (step time, devices)

  def _worst(self) -> float:
    if len(self._kept) < self.k:
      return math.inf
    return max(t for t, _ in self._kept.values())

  def offer(self, candidates: np.ndarray, times: np.ndarray) -> None:
    """Offers placements [B, G] with their step times [B]."""
    if self.k == 0 or not len(times):
      return
    for row in np.flatnonzero(np.isfinite(times) & (times < self._worst())):
      t = float(times[row])
      key = same_time_key(t)
      if t >= self._worst() or key in self._kept:
        continue
      self._kept[key] = (t, candidates[row].astype(np.int32).copy())
      if len(self._kept) > self.k:
        del self._kept[max(self._kept)]

  def best(self) -> Tuple[Tuple[np.ndarray, float], ...]:
    """(devices, step time) pairs, fastest first."""
    return tuple((d.copy(), t) for t, d in
                 (self._kept[k] for k in sorted(self._kept)))


def same_time_key(step_time_s: float) -> float:
  """Step times equal to 5 significant digits share this key."""
  return float(f"{step_time_s:.4e}")


# ---- the start placement ------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class StartPlacement:
  """Where a search starts.

  Attributes:
    group_devices: int32 [G], a device per colocation group of the problem.
    step_time_s: its simulated step time (inf if infeasible).
    source: what it is, e.g. "critical_path (best of 12 heuristics)".
  """
  group_devices: np.ndarray
  step_time_s: float
  source: str


def start_placement(problem, init: str,
                    seed: Optional[int] = None) -> StartPlacement:
  """Resolves `init` for `problem` (a `PlacementProblem`).

  Args:
    problem: the placement problem.
    init: "best_heuristic" (every heuristic placer; the fastest feasible
      placement), a placer name, or the path of a placement JSON made for
      this graph and cluster.
    seed: passed to the placers.

  Raises:
    PlacementError: an unknown placer or missing file, a placement for
      another graph or cluster, or one that splits a colocation group.
  """
  from tfplace.placers import registry  # Not at import: registry loads us.
  if init == "best_heuristic":
    runs = [_start_from(problem, placement, name)
            for name, placement in heuristic_placements(problem, seed)]
    best = min(runs, key=lambda r: r.step_time_s)
    return dataclasses.replace(
        best, source=f"{best.source} (best of {len(runs)} heuristics)")
  if init in registry.list_placers():
    placement = registry.get_placer(init).place(problem, seed=seed)
    return _start_from(problem, placement, init)
  if init.endswith(".json") or os.path.exists(init):
    return _start_from_file(problem, init)
  raise PlacementError(
      f"init must be best_heuristic, a placer name or a placement JSON file; "
      f"got {init!r} (placers: {', '.join(registry.list_placers())})")


def heuristic_placements(problem, seed: Optional[int] = None) -> list:
  """(name, placement) of every heuristic placer that can place `problem`
  (those that fail are logged and skipped). The placers are only tried:
  their warnings (e.g. Baechi's groups that fit on no device where memory
  is tight) are summed up in one INFO line (`quiet_trials`).

  Raises:
    PlacementError: none could.
  """
  from tfplace.placers import registry  # Not at import: registry loads us.
  from tfplace.placers.base import PlacerKind
  out, warned = [], {}
  for name in registry.list_placers(PlacerKind.HEURISTIC):
    with collect_warnings() as warned[name]:
      try:
        out.append((name, registry.get_placer(name).place(problem,
                                                          seed=seed)))
      except PlacementError as e:
        logging.info("heuristic %s failed: %s", name, e)
  log_collected("trying every heuristic placer", warned)
  if not out:
    raise PlacementError("no heuristic placer could place this graph")
  return out


def group_devices(problem, placement) -> np.ndarray:
  """int32 [G]: the device of each colocation group of `placement` (a
  placement of `problem`'s graph and cluster, validated here)."""
  placement.validate(problem.graph, problem.cluster)
  ops = placement.to_array(problem.graph, problem.cluster)
  return np.array([ops[m[0]] for m in problem.groups.members], np.int32)


def _start_from(problem, placement, source: str) -> StartPlacement:
  """The group devices of a placement of `problem`, and its step time."""
  devices = group_devices(problem, placement)
  step = float(problem.simulate_groups(devices[None, :])[0])
  return StartPlacement(devices, step, source)


def _start_from_file(problem, path: str) -> StartPlacement:
  """A placement file checked against the problem's graph and cluster."""
  from tfplace.placement import Placement  # Not at import: keeps TF lazy.
  placement = Placement.load(path)
  meta = placement.metadata
  graph, cluster = problem.graph, problem.cluster
  if meta.graph_fingerprint and meta.graph_fingerprint != graph.fingerprint:
    raise PlacementError(f"the start placement {path} was made for another "
                         f"graph (fingerprint {meta.graph_fingerprint}, this "
                         f"graph {graph.fingerprint})")
  if meta.devices and tuple(meta.devices) != tuple(cluster.device_names):
    raise PlacementError(
        f"the start placement {path} was made for another cluster (devices "
        f"{', '.join(meta.devices)}; cluster {cluster.name!r} has "
        f"{', '.join(cluster.device_names)})")
  try:
    return _start_from(problem, placement, f"file {path}")
  except PlacementError as e:
    raise PlacementError(f"the start placement {path} does not fit this "
                         f"graph and cluster: {e}") from None
