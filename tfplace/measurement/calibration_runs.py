"""Calibration on a running cluster: placements, measurements, fits.

`calibrate_on_cluster` is what `tfplace calibrate` runs: the link benchmark
between two workers, the calibration placements (`calibration_placements`:
all ops on one device, the topological halves, random colocation-group
placements) measured with `measure_batch`, the fits of
`tfplace.measurement.calibration_fit` (`fit_from_runs`), and the fitted
simulator's in-sample error on those same runs. `scripts/fidelity.py` uses
the same pieces, then scores the simulator on other placements.
"""

import dataclasses
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from absl import logging
import numpy as np
from tqdm.auto import tqdm

from tfplace.cost.cluster import Cluster
from tfplace.cost.calibrated import Calibration
from tfplace.errors import MeasureError
from tfplace.graph.op_graph import OpGraph
from tfplace.measurement import comm_benchmark
from tfplace.measurement.batch import measure_batch
from tfplace.measurement.calibration_fit import (calibrate, calibrated_simulator,
                                             fit_overheads)
from tfplace.measurement.comm_benchmark import LinkFit
from tfplace.measurement.config import MeasureConfig
from tfplace.placement import Placement


def random_group_placements(graph: OpGraph, cluster: Cluster, count: int,
                            seed: int = 0) -> List[Tuple[str, Placement]]:
  """Colocation groups sent to random devices, with a random bias each."""
  rng = np.random.default_rng(seed)
  out = []
  d = cluster.num_devices
  for k in range(count):
    weights = rng.dirichlet(np.ones(d) * 0.7)
    group_dev = rng.choice(d, size=graph.num_colocation_groups, p=weights)
    out.append((f"random_{k}", Placement.from_array(
        graph, cluster, group_dev[graph.group_of], placer="random")))
  return out


def halves_placement(graph: OpGraph, cluster: Cluster) -> Placement:
  """Colocation groups in topological order, cut into D contiguous parts."""
  order = graph.topo_order
  rank = np.empty(graph.num_ops, dtype=np.int64)
  rank[order] = np.arange(graph.num_ops)
  first = np.full(graph.num_colocation_groups, graph.num_ops)
  np.minimum.at(first, graph.group_of, rank)
  part = (np.argsort(np.argsort(first)) * cluster.num_devices
          // graph.num_colocation_groups)
  return Placement.from_array(graph, cluster, part[graph.group_of],
                              placer="halves")


def calibration_placements(graph: OpGraph, cluster: Cluster, seed: int = 0,
                           num_random: int = 8
                           ) -> List[Tuple[str, Placement]]:
  """All ops on the last device (not device 0, so that a baseline's
  all-on-device-0 placement can still be evaluated), the topological halves,
  and `num_random` random group placements (seeded apart from the evaluated
  ones of `tfplace.experiments.fidelity`)."""
  last = np.full(graph.num_ops, cluster.num_devices - 1, dtype=np.int32)
  return ([(f"all_on_{cluster.num_devices - 1}",
            Placement.from_array(graph, cluster, last))]
          + [("halves", halves_placement(graph, cluster))]
          + [(f"calib_{label}", p) for label, p in random_group_placements(
              graph, cluster, num_random, seed=seed + 1000)])


def fit_from_runs(graph: OpGraph, cluster: Cluster,
                  labelled: Sequence[Tuple[str, Placement]], outcomes,
                  link_fits: Optional[Dict[str, LinkFit]] = None
                  ) -> Calibration:
  """Op-time calibration, then step and transfer overheads, from runs.

  Args:
    graph: the measured graph.
    cluster: the (uncalibrated) cluster of the runs.
    labelled: (label, placement) per run.
    outcomes: the `MeasureOutcome` of each run, in the same order.
    link_fits: link kind -> fitted latency/bandwidth.

  Raises:
    MeasureError: no run succeeded.
  """
  timings = [o.timing for o in outcomes if o.ok]
  if not timings:
    raise MeasureError(f"{graph.name}: no calibration run succeeded: "
                       f"{outcomes[0].error if outcomes else 'no runs'}")
  # Op times come from the one-device runs when there are some: on
  # multi-worker runs gRPC work shares the pinned cores and inflates op
  # durations (that work is the transfer overhead, fitted next).
  single = [o.timing for (_, p), o in zip(labelled, outcomes)
            if o.ok and len(set(p.devices.values())) == 1]
  calibration = calibrate(graph, cluster, single or timings,
                          link_fits=link_fits)
  measured = [(p.to_array(graph, cluster), o.timing.median_step_time_s)
              for (_, p), o in zip(labelled, outcomes) if o.ok]
  return fit_overheads(graph, cluster, calibration, measured)


@dataclasses.dataclass(frozen=True)
class PredictedRun:
  """One measured placement: the calibrated simulator's step time vs the
  measured one (calibration runs and fidelity rows alike).

  Attributes:
    label: the placement's label ("all_on_1", "halves", "m_etf", ...).
    predicted_s: the calibrated simulator's step time (seconds).
    measured_s: the measured median step time, None if the run failed.
    error: the failure message of a failed run.
    num_transfers: cross-device tensors of the placement (0: not counted).
  """
  label: str
  predicted_s: float
  measured_s: Optional[float]
  error: Optional[str] = None
  num_transfers: int = 0

  @property
  def abs_rel_error(self) -> Optional[float]:
    if self.measured_s is None or not np.isfinite(self.predicted_s):
      return None
    return abs(self.predicted_s - self.measured_s) / self.measured_s


def median_abs_rel_error(runs: Sequence[PredictedRun]) -> float:
  """Median |predicted - measured| / measured over the measured runs (nan if
  none was measured)."""
  errors = [r.abs_rel_error for r in runs if r.abs_rel_error is not None]
  return float(np.median(errors)) if errors else float("nan")


@dataclasses.dataclass(frozen=True)
class CalibrationReport:
  """A fitted calibration and how well it reproduces its own runs.

  Attributes:
    graph_name: the graph it was fitted on.
    num_ops: that graph's ops.
    calibration: the fitted calibration.
    runs: the calibration runs, predicted (in-sample) vs measured.
    median_abs_rel_error: median |predicted - measured| / measured over the
      successful runs: an in-sample figure (the fit saw these runs).
    link_fits: link kind -> benchmarked link (empty: the cluster's default
      link was kept).
  """
  graph_name: str
  num_ops: int
  calibration: Calibration
  runs: Tuple[PredictedRun, ...]
  median_abs_rel_error: float
  link_fits: Mapping[str, LinkFit] = dataclasses.field(default_factory=dict)


def report_from_runs(graph: OpGraph, cluster: Cluster,
                     labelled: Sequence[Tuple[str, Placement]], outcomes,
                     link_fits: Optional[Dict[str, LinkFit]] = None
                     ) -> CalibrationReport:
  """`fit_from_runs`, then the fitted simulator on the same runs.

  Args:
    graph: the measured graph.
    cluster: the (uncalibrated) cluster of the runs.
    labelled: (label, placement) per run.
    outcomes: the `MeasureOutcome` of each run, in the same order.
    link_fits: link kind -> benchmarked link.
  """
  calibration = fit_from_runs(graph, cluster, labelled, outcomes, link_fits)
  sim = calibrated_simulator(graph, cluster, calibration)
  ids = np.stack([p.to_array(graph, cluster) for _, p in labelled])
  predicted = sim.simulate_batch(ids)
  runs = tuple(
      PredictedRun(label, float(pred),
                   o.timing.median_step_time_s if o.ok else None, o.error)
      for (label, _), pred, o in zip(labelled, predicted, outcomes))
  return CalibrationReport(graph.name, graph.num_ops, calibration, runs,
                           median_abs_rel_error(runs), dict(link_fits or {}))


def benchmark_link(cluster: Cluster, config: MeasureConfig, *,
                   sizes: Sequence[int] = comm_benchmark.DEFAULT_SIZES,
                   progress: bool = True) -> Optional[LinkFit]:
  """Fits the link between the cluster's first two devices.

  Args:
    cluster: the cluster of the running servers.
    config: their session target; `warmup` untimed and `steps` timed runs
      per tensor size.
    sizes: tensor sizes in bytes.
    progress: show a tqdm bar.

  Returns:
    The fit, or None (logged) when the cluster has one device or the
    benchmark or the fit fails: the cluster's default link is then kept.
  """
  if cluster.num_devices < 2:
    logging.info("one device: no link to benchmark")
    return None
  src, dst = cluster.device_names[:2]
  samples = []
  try:
    for nbytes in tqdm(sizes, desc="link benchmark", disable=not progress):
      samples += comm_benchmark.benchmark_transfers(
          src, dst, sizes=(nbytes,), config=config)
    fit = comm_benchmark.fit_link(samples)
  except MeasureError as e:
    logging.warning("link benchmark failed (%s); keeping the default link "
                    "%s", e, cluster.default_link)
    return None
  logging.info("link %s -> %s: latency %.3g s, bandwidth %.3g B/s (R^2 "
               "%.3f)", src, dst, fit.latency_s, fit.bandwidth, fit.r2)
  return fit


def calibrate_on_cluster(graph: OpGraph, cluster: Cluster,
                         config: MeasureConfig, *, num_random: int = 8,
                         link: bool = True, seed: int = 0,
                         cache_dir: Optional[str] = None,
                         progress: bool = True, feeds=None,
                         feed_options=None) -> CalibrationReport:
  """Benchmarks the link, measures the calibration placements, fits.

  Args:
    graph: the graph to measure (a small one is enough; the calibration is
      usable with any graph, see the module docstring).
    cluster: the (uncalibrated) cluster of the running servers.
    config: the servers' session target ("grpc://host:port"), warmup and
      timed steps per placement (the median is used), deadlines per
      placement.
    num_random: random group placements among the calibration runs.
    link: run the link benchmark (else keep the cluster's default link).
    seed: seed of the random placements.
    cache_dir: measurement cache directory.
    progress: show tqdm bars.
    feeds: values for the graph's placeholders (see `measure_batch`).
    feed_options: how synthetic input values are made.

  Returns:
    The calibration and its in-sample error on the calibration runs.

  Raises:
    MeasureError: no calibration run succeeded.
  """
  link_fit = (benchmark_link(cluster, config, progress=progress)
              if link else None)
  labelled = calibration_placements(graph, cluster, seed, num_random)
  outcomes = measure_batch(graph, [p for _, p in labelled], config,
                           cluster=cluster, cache_dir=cache_dir,
                           progress=progress, feeds=feeds,
                           feed_options=feed_options)
  link_fits = {cluster.default_link.kind: link_fit} if link_fit else None
  return report_from_runs(graph, cluster, labelled, outcomes, link_fits)
