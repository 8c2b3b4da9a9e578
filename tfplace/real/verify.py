"""Check the winners on real runs: `verify_top_k`.

    search on the simulator → K best distinct placements + the best
    heuristic → interleaved rounds on the target → the measured best

The simulator ranks placements; the target decides. After the placer's
search (any placer: a search's K best distinct placements, a heuristic's
one topped up with the next heuristics), every candidate and the best
heuristic are measured on the target in interleaved rounds
(`tfplace.real.interleaved`); the fastest, relative to the best heuristic in
the same rounds, then meets the best heuristic again in fresh rounds (the
duel: picking the fastest of several noisy figures favours a lucky one) and
is returned only if faster there too, else the best heuristic is. Its metadata
holds the report under "verify" (`VerifyReport.to_dict`): per candidate
predicted and measured times, the simulator's rank error, the measured
speed-up over the best heuristic.

Before anything runs the target is checked (servers answer, the cluster is
the target's, a calibration was made for it): one clear error, no search.
A worker that dies during the rounds fails that sample (named in the
report) and stops the rounds; the best of what was measured is returned.
"""

import dataclasses
from typing import Optional, Tuple

from absl import logging

from tfplace import interrupts
from tfplace.cost.cluster import Cluster
from tfplace.errors import PlacementError
from tfplace.graph.op_graph import OpGraph
from tfplace.measurement.config import MeasureConfig
from tfplace.placement import Placement
from tfplace.placers.problem import PlacementProblem
from tfplace.placers.registry import get_placer
from tfplace.placers.search_support import KEEP_TOP
from tfplace.real.candidates import candidate_set
from tfplace.real.interleaved import measure_interleaved
from tfplace.real.rank_report import VerifyReport, build_report, with_duel
from tfplace.real.target import Target, checked_problem


@dataclasses.dataclass(frozen=True)
class VerifySettings:
  """How the candidates are measured.

  Attributes:
    top_k: distinct placements of the placer to measure (1-16).
    rounds: interleaved rounds; each measures every candidate once.
    duel_rounds: fresh interleaved rounds of the fastest candidate against
      the best heuristic (when they differ); the candidate is returned only
      if faster there too (0: no duel, the rounds' fastest is returned).
    measure: warmup and timed steps per candidate and round, deadlines
      (its target is the verification's).
    progress: show progress bars.
  """
  top_k: int = 5
  rounds: int = 3
  duel_rounds: int = 3
  measure: MeasureConfig = MeasureConfig(warmup=2, steps=5)
  progress: bool = True

  def __post_init__(self):
    if not 1 <= self.top_k <= KEEP_TOP:
      raise PlacementError(f"top_k must be 1 to {KEEP_TOP}, got {self.top_k}")
    if self.rounds < 1 or self.duel_rounds < 0:
      raise PlacementError(f"rounds must be >= 1 and duel_rounds >= 0, got "
                           f"{self.rounds} and {self.duel_rounds}")


@dataclasses.dataclass(frozen=True)
class VerifyResult:
  """The placement returned and how it was chosen.

  Attributes:
    placement: the measured fastest; its metadata holds the prediction and
      the report ("verify").
    report: per candidate predicted vs measured, rank error, speed-up (None
      when Ctrl-C stopped the search: nothing was measured).
    candidates: every placement measured, in the report's order.
  """
  placement: Placement
  report: Optional[VerifyReport]
  candidates: Tuple[Placement, ...]


def verify_top_k(graph: OpGraph, target, placer: str = "local_search",
                 options=None, *, top_k: int = 5,
                 cluster: Optional[Cluster] = None, cost_model=None,
                 seed: Optional[int] = None,
                 settings: Optional[VerifySettings] = None,
                 feeds=None, feed_options=None) -> VerifyResult:
  """Places `graph`, then measures the K best and returns the real best.

  Args:
    graph: the training step.
    target: where to measure: a `LocalCluster`/`RemoteCluster`, the
      servers' cluster spec (`{"worker": ["host:port", ...]}`),
      "grpc://host:port" or "local" (see `tfplace.real.target`).
    placer, options, cost_model, seed: as `tfplace.place`.
    top_k: candidates of the placer (overrides `settings.top_k`).
    cluster: the cluster to place on (default: the target's, e.g.
      `LocalCluster.to_cluster()`; required for "local").
    settings: rounds and steps (`VerifySettings`).
    feeds, feed_options: the graph's inputs (see `tfplace.measure`).

  Raises:
    MeasureError: the target does not answer or is not the cluster's.
    ClusterError: the calibration of `cost_model` is another cluster's.
    PlacementError: bad placer or options.
  """
  settings = dataclasses.replace(settings or VerifySettings(), top_k=top_k)
  placer_obj = get_placer(placer, options)
  problem, resolved = checked_problem(graph, target, cluster, cost_model)
  return verify_problem(problem, placer_obj, resolved, settings, seed,
                        feeds=feeds, feed_options=feed_options)


def verify_problem(problem: PlacementProblem, placer, target: Target,
                   settings: VerifySettings, seed: Optional[int] = None, *,
                   feeds=None, feed_options=None) -> VerifyResult:
  """`verify_top_k` on a built problem and a checked target.

  A search stopped by Ctrl-C is not verified: its best so far is returned
  as the search left it (no "verify" metadata, an empty report).
  """
  chosen = candidate_set(problem, placer, settings.top_k, seed)
  placements = [c.placement for c in chosen.candidates]
  if interrupts.interrupted():
    return VerifyResult(placements[0], None, tuple(placements))
  logging.info("verifying %d placements on %s", len(placements),
               target.description)
  times = measure_interleaved(
      problem.graph, placements, target, settings.rounds, settings.measure,
      feeds=feeds, feed_options=feed_options, progress=settings.progress,
      desc=f"verify {problem.graph.name}")
  report = build_report([c.label for c in chosen.candidates],
                        [c.predicted_s for c in chosen.candidates], times,
                        chosen.reference, settings.rounds,
                        target.description)
  if (settings.duel_rounds and report.chosen != report.reference
      and not report.stopped):
    duel = measure_interleaved(
        problem.graph, [placements[report.chosen],
                        placements[report.reference]], target,
        settings.duel_rounds, settings.measure, feeds=feeds,
        feed_options=feed_options, progress=settings.progress,
        desc=f"duel {problem.graph.name}")
    report = with_duel(report, duel)
  best = placements[report.chosen]
  extra = dict(best.metadata.extra, verify=report.to_dict())
  return VerifyResult(best.with_metadata(extra=extra), report,
                      tuple(placements))
