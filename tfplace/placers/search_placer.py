"""The flow every search placer shares, around its algorithm.

    budget → start placement → (coarsen) → search → best placement

`SearchPlacer.place` turns the options into a `Budget`, resolves the start
placement (`init`), optionally coarsens the colocation groups into
`coarsen_k` groups (`tfplace.grouping.coarsen`) and projects the start onto
them, runs the subclass's algorithm over a `SearchSpace` whose evaluator is
the problem's simulator, and returns the best placement found: never worse
than the start (the start is returned when the search found nothing
better). The placement's metadata holds the search's figures under
"search" (step times, evaluations, seconds, history, interrupted, the
algorithm's own figures).
"""

import abc
import dataclasses
import textwrap
import time
from typing import List, Optional

import numpy as np

from tfplace.grouping.coarsen import METHODS, coarsen_to_k
from tfplace.grouping.group_graph import GroupGraph, build_group_graph
from tfplace.placement import Placement
from tfplace.placers.base import Placer, PlacerKind
from tfplace.placers.search_support import (Budget, SearchResult, SearchSpace,
                                            StartPlacement, budget_from_options,
                                            same_time_key, start_placement)
from tfplace.grouping.chunks import unit_group_graph, units

START_CHUNKS = "start_chunks"
COARSEN_METHODS = METHODS + (START_CHUNKS,)

_COMMON_DOC = """\
    budget_s: wall-clock seconds the search may take (the start placement is
      computed before); must be > 0.
    max_evaluations: simulator evaluations the search may spend (0: no
      limit).
    init: the start placement: best_heuristic (every heuristic placer, the
      fastest feasible one), a placer name, or a placement JSON file made for
      this graph and cluster.
    coarsen_k: search over this many coarse groups (0: the colocation
      groups themselves).
    coarsen_method: how to coarsen: heavy_edge, metis, or start_chunks (the
      learned placers' units: coarsen_k topological chunks, each split by
      the start placement's devices, `tfplace.grouping.chunks`).
    num_threads: simulator threads per batch of candidates (0: every core
      this process may use; the results are the same, only faster: on 2
      cores NMT's local search ran 1.7x the evaluations per second).
    progress: show a progress bar with the best step time.
    summary_dir: if set, the best step time against evaluations is written
      there as a tf.summary curve ("search/best_step_time_s").
"""


def search_options(cls: type) -> type:
  """Decorator for a search placer's Options: a frozen dataclass whose
  docstring's Attributes section gains the shared options' lines."""
  doc = cls.__doc__ or ""
  marker = "Attributes:\n"
  if marker in doc:
    head, tail = doc.split(marker, 1)
    indent = " " * (len(tail) - len(tail.lstrip(" ")))
    common = textwrap.indent(textwrap.dedent(_COMMON_DOC), indent)
    cls.__doc__ = head + marker + common + tail
  return cls


@dataclasses.dataclass(frozen=True)
class SearchOptions:
  """Options every search placer has (see `_COMMON_DOC`)."""
  budget_s: float = 60.0
  max_evaluations: int = 0
  init: str = "best_heuristic"
  coarsen_k: int = 0
  coarsen_method: str = "heavy_edge"
  num_threads: int = 0
  progress: bool = True
  summary_dir: str = ""

  def __post_init__(self):
    budget_from_options(self.budget_s, self.max_evaluations)  # Raises.
    if self.coarsen_k < 0:
      raise ValueError(f"coarsen_k must be >= 0, got {self.coarsen_k}")
    if self.coarsen_method not in COARSEN_METHODS:
      raise ValueError(f"coarsen_method must be one of {list(COARSEN_METHODS)}"
                       f", got {self.coarsen_method!r}")
    if self.num_threads < 0:
      raise ValueError(f"num_threads must be >= 0 (0: every core), got "
                       f"{self.num_threads}")


@dataclasses.dataclass(frozen=True, eq=False)
class SearchContext:
  """What a search algorithm gets from the flow.

  Attributes:
    problem: the placement problem.
    space: the groups searched over, the evaluator, device memory.
    start: int32 [G], the start placement on `space.groups`.
    start_step_time_s: its step time (None: not known, evaluate it).
    fine_of: int [colocation groups], the searched group of each colocation
      group.
  """
  problem: object
  space: SearchSpace
  start: np.ndarray
  start_step_time_s: Optional[float]
  fine_of: np.ndarray


class SearchPlacer(Placer, abc.ABC):
  """A placer that searches with the simulator (see the module docstring)."""

  kind = PlacerKind.SEARCH
  Options = SearchOptions

  @abc.abstractmethod
  def _search(self, context: SearchContext, seed: Optional[int]
              ) -> SearchResult:
    """Runs the algorithm from `context.start`."""

  def budget(self) -> Budget:
    """The search budget of the options."""
    return budget_from_options(self.options.budget_s,
                               self.options.max_evaluations)

  def place(self, problem, seed: Optional[int] = None) -> Placement:
    return self.place_candidates(problem, 1, seed)[0]

  def place_candidates(self, problem, k: int,
                       seed: Optional[int] = None) -> List[Placement]:
    """The best placement (as `place`), then up to k - 1 other distinct
    placements the search saw, fastest first on the simulator (the start
    among them when it is one of the fastest)."""
    self.budget()  # A bad budget fails before any work.
    t0 = time.perf_counter()
    options = self.options
    start = start_placement(problem, options.init, seed)
    start_seconds = time.perf_counter() - t0
    context = self._context(problem, start, seed)
    result = self._search(context, seed)
    fine = result.group_devices[context.fine_of]
    kept_start = not result.step_time_s < start.step_time_s
    if kept_start:
      fine = start.group_devices
    summary = result.summary()
    summary.update(
        search_start_step_time_s=summary.pop("start_step_time_s"),
        start=start.source, start_step_time_s=_number(start.step_time_s),
        start_seconds=round(start_seconds, 3),
        groups=int(context.space.groups.num_groups),
        returned_start=kept_start)
    if options.summary_dir:
      write_curve(options.summary_dir, result)
    placement = problem.placement(fine, self.name)
    extra = dict(placement.metadata.extra, search=summary)
    best = placement.with_metadata(extra=extra)
    return [best] + self._others(problem, result, context, start, fine, k)

  def _others(self, problem, result: SearchResult, context: SearchContext,
              start: StartPlacement, best: np.ndarray,
              k: int) -> List[Placement]:
    """Up to k - 1 placements of `result.top` and the start, other than
    `best` and of other step times (see `TopPlacements`), fastest first."""
    ranked = [(t, d[context.fine_of]) for d, t in result.top]
    ranked.append((start.step_time_s, start.group_devices))
    ranked.sort(key=lambda pair: pair[0])
    best_time = min(result.step_time_s, start.step_time_s)
    seen = {best.astype(np.int32).tobytes(), same_time_key(best_time)}
    out = []
    for t, devices in ranked:
      if len(out) >= k - 1:
        break
      keys = (devices.astype(np.int32).tobytes(), same_time_key(t))
      if not np.isfinite(t) or seen.intersection(keys):
        continue
      seen.update(keys)
      out.append(problem.placement(devices, self.name).with_metadata(
          extra={"candidate_of": self.name}))
    return out

  def _context(self, problem, start: StartPlacement,
               seed: Optional[int]) -> SearchContext:
    """The space searched (colocation or coarse groups) and the start on it."""
    options = self.options
    if options.coarsen_k > 0:
      if options.coarsen_method == START_CHUNKS:
        labels = units(problem.groups, start.group_devices,
                       options.coarsen_k)[problem.groups.group_of]
      else:
        labels = coarsen_to_k(problem.graph, problem.costs, options.coarsen_k,
                              options.coarsen_method, seed)
      groups = build_group_graph(problem.graph, problem.costs, group_of=labels)
      fine_of = groups.group_of[[m[0] for m in problem.groups.members]]
      coarse_start = project(problem.groups, start.group_devices, groups,
                             fine_of)
      start_time = None
    else:
      groups, fine_of = problem.groups, np.arange(problem.groups.num_groups)
      coarse_start, start_time = start.group_devices, start.step_time_s
    return SearchContext(problem,
                         search_space(problem, groups, options.num_threads),
                         coarse_start, start_time, fine_of)

  def unit_stage(self, context: SearchContext,
                 num_chunks: int) -> Optional["UnitStage"]:
    """The units of a coarse first stage over `context` (see `UnitStage`),
    or None: the search is over coarsened groups already (`coarsen_k`), or
    there would be no fewer units than groups."""
    problem, groups = context.problem, context.space.groups
    if groups is not problem.groups:
      return None
    unit_of = units(groups, context.start, num_chunks)
    if int(unit_of.max()) + 1 >= groups.num_groups:
      return None
    unit_graph, unit_of = unit_group_graph(problem.graph, problem.costs,
                                           groups, unit_of)
    start = np.zeros(unit_graph.num_groups, dtype=np.int32)
    start[unit_of] = context.start  # Each unit is on one device in it.
    return UnitStage(
        search_space(problem, unit_graph, self.options.num_threads), start,
        unit_of)


@dataclasses.dataclass(frozen=True, eq=False)
class UnitStage:
  """A coarse first stage of a search over the colocation groups: the
  learned placers' units (`tfplace.grouping.chunks`: topological chunks of
  the groups, each split by the start placement's devices), searched before
  the groups themselves. A unit move is many group moves at once: in 60 s on
  k80x4 a local search that spends part of its budget on them first ended
  2.9-6.4 % faster on NMT and 1.3-1.4 % on Inception-V3 than one over the
  groups alone, and within 1 % on RNNLM and two synthetic graphs
  (WORKSPACE_NOTES.md, "Search placers").

  Attributes:
    space: the units searched over.
    start: int32 [U], the start placement on the units (the same placement
      as the groups' start: every unit is on one device in it).
    unit_of: int32 [G], the unit of each colocation group; a unit placement
      p is p[unit_of] on the groups.
  """
  space: SearchSpace
  start: np.ndarray
  unit_of: np.ndarray


def search_space(problem, groups: GroupGraph,
                 num_threads: int = 1) -> SearchSpace:
  """`groups` of `problem` with the problem's simulator as evaluator
  (its parallel kernel compiled before a search's clock starts)."""
  simulator = problem.simulator
  simulator.prepare_threads(num_threads)

  def evaluate(candidates: np.ndarray) -> np.ndarray:
    return simulator.simulate_batch(groups.expand(candidates),
                                    num_threads=num_threads)

  capacity = np.array([d.memory_bytes for d in problem.cluster.devices],
                      dtype=np.float64)
  return SearchSpace(groups, evaluate, capacity)


def project(fine: GroupGraph, fine_devices: np.ndarray, coarse: GroupGraph,
            fine_of: np.ndarray) -> np.ndarray:
  """int32 [coarse groups]: each coarse group on the allowed device where
  most of its members' compute was (members weighed by their compute on
  their fastest device)."""
  weight = np.where(fine.allowed, fine.compute_s, np.inf).min(axis=1)
  weight = np.where(np.isfinite(weight), weight, 0.0) + 1e-12
  votes = np.zeros((coarse.num_groups, coarse.num_devices))
  np.add.at(votes, (fine_of, fine_devices), weight)
  votes = np.where(coarse.allowed, votes, -1.0)
  return np.argmax(votes, axis=1).astype(np.int32)


def write_curve(summary_dir: str, result: SearchResult) -> None:
  """The best step time after each improvement, as a tf.summary scalar
  (step = evaluations) for TensorBoard."""
  import tensorflow as tf  # Lazy: only when a curve is asked for.
  writer = tf.summary.create_file_writer(summary_dir)
  with writer.as_default():
    for point in result.history:
      tf.summary.scalar("search/best_step_time_s", point.best_step_time_s,
                        step=point.evaluations)
  writer.flush()
  writer.close()


def config_from_options(config_cls: type, options):
  """A `config_cls` (an algorithm's frozen config) with the option values of
  the same names."""
  names = {f.name for f in dataclasses.fields(config_cls)}
  return config_cls(**{n: getattr(options, n) for n in names
                       if hasattr(options, n)})


def _number(x: float):
  return float(x) if np.isfinite(x) else None
