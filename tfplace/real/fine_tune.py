"""Fine-tune a placement on measured step times: `--real_reward`.

    the simulator's result → a search whose evaluator measures on the target
    (`MeasuredEvaluator`: batched, cached, each batch between two runs of
    the start placement, failures a penalty) → the best measured → a duel
    against the start in fresh rounds → returned only if faster there too

The search is `local_search` over the colocation groups (greedy, with block
moves over a heavy-edge coarsening into `blocks` blocks: on real runs a
single small group rarely changes the step time measurably) or
`cross_entropy` over those blocks. It starts from the simulator-found
placement, which is also the reference every batch is measured against, and
stops on a real-time budget that includes the duel. A dead worker ends it
with the best so far (`StopSearch`); Ctrl-C ends it without the duel (the
start is returned: nothing unconfirmed is).
"""

import dataclasses
import math
import time
from typing import Optional

import numpy as np

from tfplace.errors import PlacementError
from tfplace.grouping.coarsen import coarsen_to_k
from tfplace.grouping.group_graph import build_group_graph
from tfplace.placement import Placement
from tfplace.placers.base import PlacerKind
from tfplace.placers.cross_entropy import CrossEntropyConfig, cross_entropy
from tfplace.placers.local_search import LocalSearchConfig, local_search
from tfplace.placers.problem import PlacementProblem
from tfplace.placers.search_placer import project
from tfplace.placers.search_support import (Budget, SearchResult, SearchSpace,
                                           group_devices)
from tfplace.real.interleaved import measure_interleaved
from tfplace.real.measured_evaluator import (MeasuredEvaluator,
                                             MeasuredSettings, drift)
from tfplace.real.target import Target

ALGORITHMS = ("local_search", "cross_entropy")


@dataclasses.dataclass(frozen=True)
class RealRewardSettings:
  """How the fine-tune searches.

  Attributes:
    budget_s: real seconds for the whole fine-tune (search and duel).
    algorithm: "local_search" or "cross_entropy".
    batch_size: placements measured per batch (between two reference runs).
    blocks: heavy-edge blocks: local search's block moves, cross-entropy's
      groups.
    duel_rounds: fresh interleaved rounds of the best found against the
      start (0: none; the search's best is returned as measured).
    measured: steps per placement, penalty, deadlines, cache.
    progress: show the search's progress bar.
  """
  budget_s: float = 300.0
  algorithm: str = "local_search"
  batch_size: int = 4
  blocks: int = 16
  duel_rounds: int = 3
  measured: MeasuredSettings = MeasuredSettings()
  progress: bool = True

  def __post_init__(self):
    if not (self.budget_s > 0 and math.isfinite(self.budget_s)):
      raise PlacementError(f"the real-run budget must be a positive number "
                           f"of seconds, got {self.budget_s!r}")
    if self.algorithm not in ALGORITHMS:
      raise PlacementError(f"real-reward algorithm must be one of "
                           f"{list(ALGORITHMS)}, got {self.algorithm!r}")
    if self.batch_size < 1 or self.blocks < 2 or self.duel_rounds < 0:
      raise PlacementError("batch_size >= 1, blocks >= 2, duel_rounds >= 0")


@dataclasses.dataclass(frozen=True)
class FineTuneResult:
  """What the fine-tune found.

  Attributes:
    placement: the fine-tuned placement if it won the duel, else the start;
      its metadata holds `summary()` under "real_reward".
    improved: True if the fine-tuned placement is returned.
    search: the search's figures (`SearchResult.summary()`, or a learned
      placer's), without its curve.
    duel_ratio: fine-tuned / start in the duel's rounds (None: no duel).
    measured, remembered, failed: placements measured, looked up, failed.
    confirmed, rejected: placements measured faster than the best so far,
      and how many of them lost their confirmation pairs.
    drift: max / min of the start's medians over the run.
    seconds: wall time of the whole fine-tune.
  """
  placement: Placement
  improved: bool
  search: dict
  duel_ratio: Optional[float]
  measured: int
  remembered: int
  failed: int
  confirmed: int
  rejected: int
  drift: float
  seconds: float

  def summary(self) -> dict:
    """JSON-ready figures (placement metadata "real_reward")."""
    return {"improved": self.improved, "duel_ratio": self.duel_ratio,
            "measured": self.measured, "remembered": self.remembered,
            "failed": self.failed, "confirmed": self.confirmed,
            "rejected": self.rejected, "drift": round(self.drift, 4),
            "seconds": round(self.seconds, 2), "search": dict(self.search)}


def fine_tune(problem: PlacementProblem, start: Placement, target: Target,
              settings: Optional[RealRewardSettings] = None,
              seed: Optional[int] = None, *, placer=None, feeds=None,
              feed_options=None) -> FineTuneResult:
  """Searches on measured times from `start` (see the module docstring).

  Args:
    problem: the graph, cluster and colocation groups.
    start: the simulator-found placement (the start and the reference).
    target: where to measure (checked already).
    settings: budget, search, measurements.
    seed: the search's seed.
    placer: a learned placer whose simulator-trained policy fine-tunes
      (`tfplace.real.learned_fine_tune`; None: `settings.algorithm`).
    feeds, feed_options: the graph's inputs.

  Raises:
    MeasureError: the start placement cannot be measured on the target.
    PlacementError: a learned placer without its checkpoint.
  """
  settings = settings or RealRewardSettings()
  t0 = time.perf_counter()
  begin = group_devices(problem, start)
  evaluator = MeasuredEvaluator(problem, target, begin, settings.measured,
                                feeds, feed_options)
  duel_s = settings.duel_rounds * 2 * evaluator.seconds_per_measurement
  budget_s = max(1.0, settings.budget_s - (time.perf_counter() - t0) - duel_s)
  if placer is not None and placer.kind == PlacerKind.LEARNED:
    from tfplace.real.learned_fine_tune import learned_search
    best, summary = learned_search(problem, placer, evaluator, budget_s,
                                   settings, seed)
  else:
    result = _search(problem, evaluator, begin, settings,
                     Budget(seconds=budget_s), seed)
    best, summary = result.group_devices, _without_history(result.summary())
  changed = not np.array_equal(best, begin)
  duel = changed and settings.duel_rounds and not summary["interrupted"]
  ratio = (_duel(problem, target, best, begin, settings, feeds, feed_options)
           if duel else None)
  improved = changed and (not settings.duel_rounds
                          or (ratio is not None and ratio < 1.0))
  stats = evaluator.stats
  chosen = problem.placement(best if improved else begin,
                             start.metadata.placer)
  out = FineTuneResult(
      chosen, improved, summary, ratio, stats.measured, stats.remembered,
      len(stats.failed), stats.confirmed, stats.rejected, drift(stats),
      time.perf_counter() - t0)
  extra = dict(start.metadata.extra, real_reward=out.summary())
  return dataclasses.replace(out, placement=chosen.with_metadata(extra=extra))


def _without_history(summary: dict) -> dict:
  return {k: v for k, v in summary.items() if k not in ("history", "curve")}


def _search(problem, evaluator, begin, settings: RealRewardSettings,
            budget: Budget, seed) -> SearchResult:
  """The search on measured times, over colocation groups (local search)
  or blocks (cross-entropy), mapped back to colocation groups."""
  groups = problem.groups
  labels = coarsen_to_k(problem.graph, problem.costs, settings.blocks,
                        "heavy_edge", seed)
  capacity = np.array([d.memory_bytes for d in problem.cluster.devices],
                      dtype=np.float64)
  blocks = labels[[m[0] for m in groups.members]]
  start_s = evaluator.reference_s
  if settings.algorithm == "local_search":
    config = LocalSearchConfig(batch_size=settings.batch_size, temperature=0.0,
                               swap_fraction=0.1, block_fraction=0.5,
                               patience=10)
    return local_search(SearchSpace(groups, evaluator, capacity), begin,
                        budget, config, seed, settings.progress, start_s,
                        blocks)
  coarse = build_group_graph(problem.graph, problem.costs, group_of=labels)
  fine_of = coarse.group_of[[m[0] for m in groups.members]]
  coarse_start = project(groups, begin, coarse, fine_of)
  space = SearchSpace(coarse, lambda c: evaluator(c[:, fine_of]), capacity)
  config = CrossEntropyConfig(batch_size=settings.batch_size, start_mass=0.9)
  result = cross_entropy(space, coarse_start, budget, config, seed,
                         settings.progress)
  fine = result.group_devices[fine_of]
  ratio = evaluator.ratio(fine)
  if ratio is None or ratio >= 1.0:  # the projection or nothing better
    fine = begin
  return dataclasses.replace(result, group_devices=fine)


def _duel(problem, target, best, begin, settings, feeds,
          feed_options) -> Optional[float]:
  """best / start in fresh interleaved rounds (None: not measured)."""
  times = measure_interleaved(
      problem.graph, [problem.placement(best), problem.placement(begin)],
      target, settings.duel_rounds, settings.measured.measure, feeds=feeds,
      feed_options=feed_options, progress=settings.progress,
      desc=f"duel {problem.graph.name}")
  ratio = float(times.ratio_to(1)[0])
  return ratio if math.isfinite(ratio) else None


def describe_summary(summary: dict) -> str:
  """One line about a fine-tune (its `FineTuneResult.summary()`)."""
  search = summary["search"]
  line = (f"real reward: {search.get('algorithm')} on measured steps, "
          f"{summary['measured']} runs ({summary['remembered']} looked up, "
          f"{summary['failed']} failed) in {summary['seconds']:.1f} s, "
          f"{summary.get('confirmed', 0)} apparent improvements confirmed "
          f"against the best so far ({summary.get('rejected', 0)} lost), "
          f"drift {summary['drift']:.2f}x; ")
  ratio = summary["duel_ratio"]
  if summary["improved"]:
    line += ("returned the fine-tuned placement" + (
        f" ({ratio:.3f}x the start in fresh rounds)" if ratio else ""))
  elif ratio is not None:
    line += (f"the best found was {ratio:.3f}x the start in fresh rounds: "
             "the start is kept")
  else:
    line += "nothing faster than the start was found: the start is kept"
  if search.get("stop_reason"):
    line += f"; stopped: {search['stop_reason']}"
  return line
