"""Local search over group placements on the simulator.

Simulated annealing with batched neighbourhoods, as FlexFlow's MCMC search
over its execution simulator (Jia, Zaharia & Aiken, Beyond Data and Model
Parallelism for Deep Neural Networks, SysML 2019): from the current
placement, propose a batch of neighbours (move one group to another device,
often the device of a group it exchanges tensors with, or swap the devices
of two groups), score them all in one `simulate_batch` call, move to the
best if it improves, else to it with the Metropolis probability
exp(-(t' - t) / T) while the temperature T cools to 0 over the budget. An
infeasible neighbour (inf: out of memory, no kernel) is never accepted, and
neighbours whose parameters alone overflow a device are not even simulated.
After `patience` batches without a new best the search returns to the best
placement found.

The placer searches in two stages by default: first over the learned
placers' units (`unit_chunks` topological chunks of the colocation groups,
each split by the start's devices; a unit move is many group moves at
once) for `unit_fraction` of the budget or until `patience` batches bring
no new best, then over the colocation groups from the best unit placement
for the rest (`search_placer.UnitStage`).
"""

import dataclasses
import math
from typing import Optional

import numpy as np

from tfplace.grouping.coarsen import coarsen_to_k
from tfplace.placers.registry import register_placer
from tfplace.placers.search_placer import (SearchContext, SearchOptions,
                                           SearchPlacer, UnitStage,
                                           config_from_options,
                                           search_options)
from tfplace.placers.search_support import (Budget, SearchResult, SearchRun,
                                            SearchSpace, chain_results)


# Empty proposals in a row after which a placement has no neighbour.
_MAX_EMPTY_BATCHES = 100


@dataclasses.dataclass(frozen=True)
class LocalSearchConfig:
  """The search's own knobs (the placer's options add budget and start).

  Attributes:
    batch_size: neighbours scored per simulator call.
    swap_fraction: share of neighbours that swap two groups (the rest move
      one group).
    neighbour_fraction: share of moves that go to the device of a group
      joined to the moved one by an edge (the rest: any allowed device).
    temperature: initial temperature, relative to the start step time
      (0: greedy descent).
    patience: batches without a new best before returning to the best.
    block_fraction: share of neighbours that move a whole block (a set of
      groups from `blocks`) to one device.
  """
  batch_size: int = 64
  swap_fraction: float = 0.25
  neighbour_fraction: float = 0.5
  temperature: float = 0.01
  patience: int = 50
  block_fraction: float = 0.2


class _Neighbours:
  """Proposes neighbours of a placement (moves and swaps)."""

  def __init__(self, space: SearchSpace, config: LocalSearchConfig,
               rng: np.random.Generator, blocks: Optional[np.ndarray]):
    groups = space.groups
    self._blocks = None
    if blocks is not None and config.block_fraction > 0:
      order = np.argsort(blocks, kind="stable")
      bounds = np.flatnonzero(np.diff(blocks[order])) + 1
      self._blocks = [b for b in np.split(order, bounds) if len(b) > 1]
    self._allowed = space.allowed
    self._config, self._rng = config, rng
    self._hash_weights = _hash_weights(groups.num_groups)
    g = groups.num_groups
    src = np.concatenate([groups.edge_src, groups.edge_dst]).astype(np.int64)
    dst = np.concatenate([groups.edge_dst, groups.edge_src]).astype(np.int64)
    order = np.argsort(src, kind="stable")
    self._nbr = dst[order]
    self._nbr_ptr = np.zeros(g + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=g), out=self._nbr_ptr[1:])
    self._movable = np.flatnonzero(self._allowed.sum(axis=1) > 1)
    weight = np.nanmin(np.where(self._allowed, groups.compute_s, np.nan),
                       axis=1)[self._movable]
    weight = np.nan_to_num(weight) + 1e-12
    # Half of the picks by compute (heavy groups matter most), half uniform.
    self._p = 0.5 * weight / weight.sum() + 0.5 / max(len(weight), 1)

  def propose(self, x: np.ndarray, count: int) -> np.ndarray:
    """int32 [<= count, G]: distinct neighbours of x (fewer if few exist)."""
    if len(self._movable) == 0:
      return np.zeros((0, len(x)), dtype=np.int32)
    out = np.repeat(x[None, :], count, axis=0).astype(np.int32)
    picks = self._rng.choice(self._movable, size=(count, 2), p=self._p)
    kind = self._rng.random(count)
    swap_below = self._config.swap_fraction
    block_below = swap_below + (self._config.block_fraction
                                if self._blocks else 0.0)
    for row in range(count):
      a, b = picks[row]
      if kind[row] < swap_below and self._swap(out[row], a, b):
        continue
      if swap_below <= kind[row] < block_below:
        self._move_block(out[row])
      else:
        self._move(out[row], a)
    changed = (out != x[None, :]).any(axis=1)
    return _distinct_rows(out[changed], self._hash_weights)

  def _move(self, y: np.ndarray, g: int) -> None:
    lo, hi = self._nbr_ptr[g], self._nbr_ptr[g + 1]
    if hi > lo and self._rng.random() < self._config.neighbour_fraction:
      d = y[self._nbr[self._rng.integers(lo, hi)]]
      if d != y[g] and self._allowed[g, d]:
        y[g] = d
        return
    choices = np.flatnonzero(self._allowed[g])
    choices = choices[choices != y[g]]
    if len(choices):
      y[g] = self._rng.choice(choices)

  def _move_block(self, y: np.ndarray) -> None:
    """Moves every group of a random block that can run there to one
    device (one of the block's devices or any)."""
    block = self._blocks[self._rng.integers(len(self._blocks))]
    d = int(self._rng.integers(self._allowed.shape[1]))
    ok = block[self._allowed[block, d]]
    y[ok] = d

  def _swap(self, y: np.ndarray, a: int, b: int) -> bool:
    da, db = y[a], y[b]
    if da == db or not (self._allowed[a, db] and self._allowed[b, da]):
      return False
    y[a], y[b] = db, da
    return True


def _hash_weights(width: int) -> np.ndarray:
  """int64 [width]: random 64-bit weights for `_distinct_rows`."""
  return np.random.default_rng(0).integers(1, np.iinfo(np.int64).max,
                                           size=width, dtype=np.int64)


def _distinct_rows(rows: np.ndarray,
                   weights: Optional[np.ndarray] = None) -> np.ndarray:
  """The distinct rows of `rows` [B, G], in the order first seen.

  Rows are told apart by a hash (the sum of the row times `weights`, int64
  [G]; default `_hash_weights`), checked exactly: where two different rows
  share a hash (odds ~B^2 / 2^64) it falls back to `np.unique(axis=0)`, which
  sorts whole rows and took a third of a local search's time on NMT's
  16,901 groups.
  """
  if len(rows) < 2:
    return rows
  if weights is None:
    weights = _hash_weights(rows.shape[1])
  with np.errstate(over="ignore"):
    keys = (rows.astype(np.int64) * weights[None, :]).sum(axis=1)
  _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
  if not np.array_equal(rows, rows[first[inverse.ravel()]]):
    return np.unique(rows, axis=0)  # A hash collision.
  return rows[np.sort(first)]


def local_search(space: SearchSpace, start: np.ndarray, budget: Budget,
                 config: LocalSearchConfig = LocalSearchConfig(),
                 seed: Optional[int] = None, progress: bool = True,
                 start_step_time_s: Optional[float] = None,
                 blocks: Optional[np.ndarray] = None,
                 desc: str = "local_search",
                 end_when_stale: bool = False) -> SearchResult:
  """Simulated annealing from `start` (see the module docstring).

  Args:
    space: the groups, the evaluator and device memory.
    start: int [G], the start placement.
    budget: when to stop.
    config: the search's knobs.
    seed: random seed.
    progress: show a tqdm bar.
    start_step_time_s: the start's step time, if already known.
    blocks: optional int [G], a block id per group (e.g. a coarsening of the
      groups) for block moves.
    desc: the progress bar's label.
    end_when_stale: end after `config.patience` batches without a new best
      (instead of going back to the best and going on).

  Returns:
    The best feasible placement found (`SearchResult`).
  """
  rng = np.random.default_rng(seed)
  neighbours = _Neighbours(space, config, rng, blocks)
  with SearchRun(space.evaluate, budget, start, start_step_time_s,
                 desc=desc, progress=progress) as run:
    x, fx = run.best_devices.copy(), run.start_step_time_s
    t0 = config.temperature * (fx if math.isfinite(fx) else 0.0)
    stale, empty = 0, 0
    while not run.done():
      candidates = neighbours.propose(x, run.batch_size(config.batch_size))
      candidates = candidates[space.fits(candidates)]
      if len(candidates) == 0:
        # A small batch can come out empty by chance (every block move to
        # its own device); only many in a row mean there is no neighbour.
        empty += 1
        if empty >= _MAX_EMPTY_BATCHES:
          break
        continue
      empty = 0
      best_before = run.best_step_time_s
      times = run.evaluate(candidates)
      j = int(np.argmin(times))
      if _accept(times[j], fx, t0 * (1.0 - _spent(run)), rng):
        x, fx = candidates[j].copy(), float(times[j])
      stale = 0 if run.best_step_time_s < best_before else stale + 1
      if stale >= config.patience and math.isfinite(run.best_step_time_s):
        if end_when_stale:
          break
        x, fx, stale = run.best_devices.copy(), run.best_step_time_s, 0
  return run.result(algorithm="local_search")


def _accept(new: float, current: float, temperature: float,
            rng: np.random.Generator) -> bool:
  """Metropolis: always if better, never if infeasible."""
  if not math.isfinite(new):
    return False
  if new < current:
    return True
  if temperature <= 0:
    return False
  return rng.random() < math.exp(-(new - current) / temperature)


def _spent(run: SearchRun) -> float:
  """The fraction of the budget spent (time or evaluations), in [0, 1]."""
  fractions = []
  if run.budget.seconds is not None:
    fractions.append(run.elapsed_s / run.budget.seconds)
  if run.budget.evaluations is not None:
    fractions.append(run.evaluations / run.budget.evaluations)
  return min(1.0, max(fractions))


@register_placer("local_search")
class LocalSearchPlacer(SearchPlacer):
  """Simulated annealing over group placements on the simulator.

  As FlexFlow's MCMC search over its execution simulator (Jia, Zaharia &
  Aiken, Beyond Data and Model Parallelism for Deep Neural Networks, SysML
  2019): batched neighbourhoods (move a group, to a neighbour's device or
  any; swap two groups; move a block of groups from a heavy-edge coarsening
  of `block_k` blocks), Metropolis acceptance while the temperature cools
  over the budget, infeasible neighbours never accepted, started from the
  best heuristic (or `init`); by default a first stage over coarse units.
  See the module docstring.
  """

  @search_options
  @dataclasses.dataclass(frozen=True)
  class Options(SearchOptions):
    """Options of `local_search`.

    Attributes:
      batch_size: neighbours scored per simulator call.
      temperature: initial temperature, relative to the start step time (0:
        greedy descent).
      swap_fraction: share of neighbours that swap two groups.
      neighbour_fraction: share of moves to the device of a group joined to
        the moved one.
      block_fraction: share of neighbours that move a whole block.
      block_k: blocks for block moves (a heavy-edge coarsening of the
        searched groups; 0: no block moves).
      patience: batches without a new best before going back to the best.
      unit_fraction: most of the budget first spent over units (the stage
        ends sooner after `patience` batches without a new best; 0: only
        the groups; no unit stage when coarsen_k is set either).
      unit_chunks: topological chunks the units are cut from (each split
        by the start's devices).
    """
    batch_size: int = 64
    temperature: float = 0.01
    swap_fraction: float = 0.25
    neighbour_fraction: float = 0.5
    block_fraction: float = 0.2
    block_k: int = 256
    patience: int = 50
    unit_fraction: float = 0.4
    unit_chunks: int = 64

    def __post_init__(self):
      super().__post_init__()
      if not 0.0 <= self.unit_fraction < 1.0:
        raise ValueError(f"unit_fraction must be in [0, 1), got "
                         f"{self.unit_fraction}")
      if self.unit_chunks < 1:
        raise ValueError(f"unit_chunks must be >= 1, got {self.unit_chunks}")

  def _search(self, context: SearchContext, seed: Optional[int]
              ) -> SearchResult:
    options = self.options
    config = config_from_options(LocalSearchConfig, options)
    budget = self.budget()
    stage = (self.unit_stage(context, options.unit_chunks)
             if options.unit_fraction > 0 else None)
    start, start_time = context.start, context.start_step_time_s
    if stage is not None:
      first = local_search(stage.space, stage.start,
                           budget.share(options.unit_fraction), config,
                           seed=seed, progress=options.progress,
                           start_step_time_s=start_time,
                           desc="local_search (units)", end_when_stale=True)
      start, start_time = first.group_devices[stage.unit_of], first.step_time_s
      budget = budget.left_after(first)
      if budget is None or first.interrupted or first.stop_reason:
        second = SearchResult(start, start_time, start_time, 0, 0.0, ())
        return self._chained(first, second, stage)
    second = local_search(context.space, start, budget, config, seed=seed,
                          progress=options.progress,
                          start_step_time_s=start_time,
                          blocks=self._blocks(context, seed))
    return second if stage is None else self._chained(first, second, stage)

  def _blocks(self, context: SearchContext,
              seed: Optional[int]) -> Optional[np.ndarray]:
    """int [G]: a block of a heavy-edge coarsening per searched group, for
    block moves (None: no block moves)."""
    groups = context.space.groups
    if not 0 < self.options.block_k < groups.num_groups:
      return None
    labels = coarsen_to_k(context.problem.graph, context.problem.costs,
                          self.options.block_k, "heavy_edge", seed)
    return labels[[m[0] for m in groups.members]]

  @staticmethod
  def _chained(first: SearchResult, second: SearchResult,
               stage: UnitStage) -> SearchResult:
    """Both stages as one result, with a summary of each."""
    def figures(result: SearchResult, name: str, groups: int) -> dict:
      return {"stage": name, "groups": groups,
              "evaluations": int(result.evaluations),
              "seconds": round(float(result.seconds), 3),
              "step_time_s": (float(result.step_time_s)
                              if math.isfinite(result.step_time_s) else None)}
    return chain_results(
        first, second, stage.unit_of, algorithm="local_search",
        stages=[figures(first, "units", stage.space.groups.num_groups),
                figures(second, "colocation groups", len(stage.unit_of))])
