"""The cross-entropy method over group placements on the simulator.

The non-RL half of Gao, Chen & Li, Spotlight: Optimizing Device Placement
for Training Deep Neural Networks (ICML 2018) and of Post (Gao et al.,
Post: Device Placement with Cross-Entropy Minimization and Proximal Policy
Optimization, NeurIPS 2018); the method itself is Rubinstein's (The
cross-entropy method for combinatorial and continuous optimization, 1999).
Each group has its own categorical distribution over the devices it can run
on, started near the start placement. Every round samples a batch of
placements (plus the best so far), scores them in one `simulate_batch`
call, and moves each group's distribution towards the device frequencies of
the elite (the best feasible fraction): p <- (1 - a) p + a f, with a floor
so that no allowed device's probability reaches 0. Infeasible samples are
never elite.
"""

import dataclasses
import math
from typing import Optional

import numpy as np

from tfplace.placers.registry import register_placer
from tfplace.placers.search_placer import (SearchContext, SearchOptions,
                                           SearchPlacer, config_from_options,
                                           search_options)
from tfplace.placers.search_support import (Budget, SearchResult, SearchRun,
                                            SearchSpace)


# Rounds in a row without a feasible sample before the search gives up.
_MAX_WASTED_ROUNDS = 1000


@dataclasses.dataclass(frozen=True)
class CrossEntropyConfig:
  """The method's own knobs (the placer's options add budget and start).

  Attributes:
    batch_size: placements sampled per round.
    elite_fraction: the share of a round's feasible samples that update the
      distributions.
    smoothing: a, the step towards the elite frequencies.
    start_mass: initial probability of each group's start device.
    floor: smallest probability of an allowed device (before renormalizing).
  """
  batch_size: int = 64
  elite_fraction: float = 0.1
  smoothing: float = 0.3
  start_mass: float = 0.9
  floor: float = 1e-3


def initial_distribution(allowed: np.ndarray, start: np.ndarray,
                         start_mass: float) -> np.ndarray:
  """float [G, D]: `start_mass` on each group's start device, the rest
  spread evenly over its other allowed devices (0 where not allowed)."""
  allowed = allowed.astype(np.float64)
  others = allowed.copy()
  others[np.arange(len(start)), start] = 0.0
  count = others.sum(axis=1, keepdims=True)
  p = np.where(count > 0, others * (1.0 - start_mass) / np.maximum(count, 1),
               0.0)
  p[np.arange(len(start)), start] = np.where(count[:, 0] > 0, start_mass, 1.0)
  return p


def sample(p: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
  """int32 [count, G]: one device per group from each row of p [G, D]."""
  cumulative = np.cumsum(p, axis=1)
  cumulative /= cumulative[:, -1:]
  u = rng.random((count, p.shape[0], 1))
  return (u > cumulative[None, :, :]).sum(axis=2).astype(np.int32)


def update(p: np.ndarray, elite: np.ndarray, allowed: np.ndarray,
           config: CrossEntropyConfig) -> np.ndarray:
  """The distributions moved towards the elite's device frequencies."""
  g, d = p.shape
  freq = np.zeros((g, d))
  np.add.at(freq, (np.tile(np.arange(g), len(elite)), elite.ravel()), 1.0)
  freq /= len(elite)
  p = (1.0 - config.smoothing) * p + config.smoothing * freq
  p = np.where(allowed, np.maximum(p, config.floor), 0.0)
  return p / p.sum(axis=1, keepdims=True)


def cross_entropy(space: SearchSpace, start: np.ndarray, budget: Budget,
                  config: CrossEntropyConfig = CrossEntropyConfig(),
                  seed: Optional[int] = None, progress: bool = True,
                  start_step_time_s: Optional[float] = None) -> SearchResult:
  """The cross-entropy method from `start` (see the module docstring).

  Args:
    space: the groups, the evaluator and device memory.
    start: int [G], the start placement.
    budget: when to stop.
    config: the method's knobs.
    seed: random seed.
    progress: show a tqdm bar.
    start_step_time_s: the start's step time, if already known.

  Returns:
    The best feasible placement found (`SearchResult`).
  """
  rng = np.random.default_rng(seed)
  allowed = space.allowed
  p = initial_distribution(allowed, np.asarray(start), config.start_mass)
  rounds, wasted = 0, 0
  with SearchRun(space.evaluate, budget, start, start_step_time_s,
                 desc="cross_entropy", progress=progress) as run:
    while not run.done() and wasted < _MAX_WASTED_ROUNDS:
      samples = sample(p, run.batch_size(config.batch_size), rng)
      samples = samples[space.fits(samples)]
      times = run.evaluate(samples) if len(samples) else np.zeros(0)
      feasible = np.flatnonzero(np.isfinite(times))
      if len(feasible) == 0:
        wasted += 1  # Nothing to learn from; the floor keeps exploring.
        continue
      wasted = 0
      n_elite = max(1, int(math.ceil(config.elite_fraction * len(times))))
      elite = feasible[np.argsort(times[feasible], kind="stable")[:n_elite]]
      chosen = samples[elite]
      if math.isfinite(run.best_step_time_s):  # Elitism: keep the best.
        chosen = np.concatenate([chosen, run.best_devices[None, :]])
      p = update(p, chosen, allowed, config)
      rounds += 1
  confidence = float(p.max(axis=1).mean())
  return run.result(algorithm="cross_entropy", rounds=rounds,
                    mean_max_probability=round(confidence, 4))


@register_placer("cross_entropy")
class CrossEntropyPlacer(SearchPlacer):
  """The cross-entropy method over per-group categorical distributions.

  The non-RL half of Post (Gao, Chen & Li, Post: Device Placement with
  Cross-Entropy Minimization and Proximal Policy Optimization, NeurIPS
  2018); the method is Rubinstein's (1999). Batched sampling scored by the
  simulator, elite update with smoothing and a floor, the best so far kept
  in every update. Searches `coarsen_k` coarse groups by default (one
  distribution per group). See the module docstring.
  """

  @search_options
  @dataclasses.dataclass(frozen=True)
  class Options(SearchOptions):
    """Options of `cross_entropy`.

    Attributes:
      batch_size: placements sampled per round.
      elite_fraction: share of a round's samples that update the
        distributions.
      smoothing: step towards the elite's device frequencies.
      start_mass: initial probability of each group's start device.
      floor: smallest probability of an allowed device.
    """
    coarsen_k: int = 256
    batch_size: int = 64
    elite_fraction: float = 0.1
    smoothing: float = 0.3
    start_mass: float = 0.9
    floor: float = 1e-3

  def _search(self, context: SearchContext, seed: Optional[int]
              ) -> SearchResult:
    return cross_entropy(context.space, context.start, self.budget(),
                         config_from_options(CrossEntropyConfig, self.options),
                         seed=seed, progress=self.options.progress,
                         start_step_time_s=context.start_step_time_s)
