"""Fit the simulator to measured op times: a `Calibration`.

The analytical model predicts op i on device d as r_i + k_i * o_d (roofline
seconds r_i, launch overhead o_d, k_i = 1, or the trivial-op factor). The
calibrated model (`tfplace.cost.profiled.CalibratedCostModel`) predicts

    s_T * f_t * (r_i + k_i * o'_T)

for device type T and op type t. Per device type, a non-negative weighted
fit gives c = s_T * o'_T as the median time of pure-overhead ops (r = 0) and
a = s_T so that summed a * r + c * k matches the summed measured time of the
other ops (the sums are what a step time depends on). Op types with enough
samples then get f_t = sum(measured) / sum(s_T (r + k o'_T)). Link
figures come from the comm benchmark (`fit_link`).

`fit_overheads` then fits what op records cannot show, from whole-step
times of calibration placements, by re-simulating them (a grid search that
minimizes the mean |log(predicted / measured)| over the runs): a correction
of the compute scale, the fixed step overhead (median measured - simulated
step of the one-device runs), the host overhead per transfer, an effective
link latency and whether latency holds the link
(`Cluster.overlap_latency`). The transfer overhead changes the schedule, so
it is simulated rather than fitted by a linear regression on transfer counts.

`calibrate_on_cluster` is the whole flow on a running TF server cluster
(what `tfplace calibrate` runs): the link benchmark between two workers, the
calibration placements (`calibration_placements`: all ops on one device, the
topological halves, random colocation-group placements) measured with
`measure_batch`, the fits above (`fit_from_runs`), and the fitted
simulator's in-sample error on those same runs.

A calibration is usable with any graph: `compute_scale`, the overheads and
the links describe the devices; `op_type_scale` holds factors only for op
types with enough samples, and applies to any graph's ops of those types,
while ops of other types get the device-type scale alone.
"""

import dataclasses
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from absl import logging
import numpy as np
from tqdm.auto import tqdm

from tfplace.cost.analytical import AnalyticalConfig, AnalyticalCostModel
from tfplace.cost.cluster import Cluster, LinkSpec
from tfplace.cost.op_costs import OpCosts
from tfplace.cost.profiled import (Calibration, CalibratedCostModel,
                                   apply_calibration)
from tfplace.cost.simulator import Simulator
from tfplace.errors import MeasureError
from tfplace.graph.op_graph import OpGraph
from tfplace.measurement import comm_benchmark
from tfplace.measurement.batch import measure_batch
from tfplace.measurement.comm_benchmark import LinkFit
from tfplace.measurement.runner import StepTiming
from tfplace.placement import Placement


@dataclasses.dataclass(frozen=True)
class OpSample:
  """One op's measured time next to the analytical model's parts.

  Attributes:
    op_type: TF op type.
    device_type: "CPU", "GPU", ...
    roofline_s: predicted seconds without the launch overhead.
    overhead_units: multiples of the launch overhead in the prediction.
    measured_s: measured seconds.
  """
  op_type: str
  device_type: str
  roofline_s: float
  overhead_units: float
  measured_s: float


def samples_from_timing(graph: OpGraph, cluster: Cluster, timing: StepTiming,
                        config: AnalyticalConfig = AnalyticalConfig()
                        ) -> List[OpSample]:
  """Pairs each traced op record with the analytical prediction for it."""
  costs = AnalyticalCostModel(config).op_costs(graph, cluster).compute_s
  out = []
  for rec in timing.op_records:
    i = graph.index.get(rec.name)
    j = cluster.device_index.get(rec.device)
    if i is None or j is None or not np.isfinite(costs[i, j]):
      continue
    op, device = graph.ops[i], cluster.devices[j]
    units = (config.trivial_overhead_factor
             if op.type in config.trivial_op_types else 1.0)
    roofline = max(0.0, float(costs[i, j]) - units * device.launch_overhead_s)
    out.append(OpSample(op.type, device.type, roofline, units,
                        float(rec.duration_s)))
  return out


def _fit_device_type(samples: Sequence[OpSample]) -> Dict[str, float]:
  """(scale, overhead_s) for one device type's samples.

  The overhead term c = s * o' is the median time of ops that are pure
  overhead (roofline 0); the scale makes the summed roofline work match the
  summed measured time of the other ops (what the step time depends on).
  """
  m = np.array([s.measured_s for s in samples])
  r = np.array([s.roofline_s for s in samples])
  k = np.array([s.overhead_units for s in samples])
  pure = (r <= 0) & (k > 0)
  c = float(np.median(m[pure] / k[pure])) if pure.any() else 0.0
  work = r > 0
  if work.any() and r[work].sum() > 0:
    a = float(max(np.sum(m[work] - c * k[work]), 1e-12) / r[work].sum())
  else:
    a = 1.0
  return {"scale": a, "overhead_s": c / a}


def fit_calibration(samples: Sequence[OpSample], *,
                    link_fits: Optional[Dict[str, LinkFit]] = None,
                    min_samples_per_type: int = 8,
                    notes: str = "") -> Calibration:
  """Fits compute scales, op-type factors and overheads (and links).

  Args:
    samples: measured op samples (see `samples_from_timing`).
    link_fits: link kind -> fitted latency/bandwidth (e.g. {"loopback": ...}).
    min_samples_per_type: op types with fewer samples keep factor 1.
    notes: free text stored in the calibration.

  Returns:
    A `tfplace.cost.profiled.Calibration`.

  Raises:
    MeasureError: no samples.
  """
  if not samples:
    raise MeasureError("calibration needs measured op records; none given")
  by_device: Dict[str, List[OpSample]] = {}
  for s in samples:
    by_device.setdefault(s.device_type, []).append(s)
  scale, overhead = {}, {}
  for dtype, group in sorted(by_device.items()):
    fit = _fit_device_type(group)
    scale[dtype], overhead[dtype] = fit["scale"], fit["overhead_s"]
    logging.info("calibration %s: scale %.3g, overhead %.3g s (%d ops)",
                 dtype, scale[dtype], overhead[dtype], len(group))
  op_type_scale = _op_type_factors(samples, scale, overhead,
                                   min_samples_per_type)
  links = {kind: LinkSpec(fit.latency_s, fit.bandwidth, kind)
           for kind, fit in (link_fits or {}).items()}
  return Calibration(compute_scale=scale, op_type_scale=op_type_scale,
                     launch_overhead_s=overhead, links=links,
                     notes=notes or f"fitted from {len(samples)} op records")


def _op_type_factors(samples: Sequence[OpSample], scale: Dict[str, float],
                     overhead: Dict[str, float], min_samples: int
                     ) -> Dict[str, float]:
  """Per op type: summed measured / summed calibrated prediction."""
  sums: Dict[str, List[float]] = {}
  for s in samples:
    pred = scale[s.device_type] * (s.roofline_s
                                   + s.overhead_units * overhead[s.device_type])
    entry = sums.setdefault(s.op_type, [0.0, 0.0, 0])
    entry[0] += s.measured_s
    entry[1] += pred
    entry[2] += 1
  out = {}
  for t, (measured, pred, n) in sorted(sums.items()):
    if n >= min_samples and pred > 0 and measured > 0:
      f = measured / pred
      if abs(f - 1.0) > 0.05:
        out[t] = float(f)
  return out


def calibrate(graph: OpGraph, cluster: Cluster,
              timings: Sequence[StepTiming], *,
              link_fits: Optional[Dict[str, LinkFit]] = None,
              min_samples_per_type: int = 8) -> Calibration:
  """`fit_calibration` over the op records of several measured placements."""
  samples: List[OpSample] = []
  for timing in timings:
    samples.extend(samples_from_timing(graph, cluster, timing))
  return fit_calibration(
      samples, link_fits=link_fits, min_samples_per_type=min_samples_per_type,
      notes=f"fitted from {len(samples)} op records of {graph.name} "
            f"({len(timings)} runs) on {cluster.name}")


def calibrated_simulator(graph: OpGraph, cluster: Cluster,
                         calibration: Calibration,
                         costs: Optional[OpCosts] = None) -> Simulator:
  """The simulator of `graph` on `cluster` with `calibration` applied to the
  op costs and the cluster (links, overheads).

  Args:
    graph: the op graph.
    cluster: the uncalibrated cluster.
    calibration: the calibration.
    costs: the calibrated op costs if already computed (they depend only on
      the compute factors and launch overheads).
  """
  calibrated = apply_calibration(cluster, calibration)
  if costs is None:
    costs = CalibratedCostModel(calibration).op_costs(graph, calibrated)
  return Simulator(graph, calibrated, costs)


@dataclasses.dataclass(frozen=True)
class OverheadSearch:
  """Candidates tried by `fit_overheads`.

  Attributes:
    transfer_overheads_s: per-transfer host overheads tried (seconds).
    latency_factors: multiples of the calibration's link latency tried.
    overlap_latency: link models tried (see `Cluster.overlap_latency`).
    compute_factors: multipliers of the fitted compute scales tried.
  """
  transfer_overheads_s: Tuple[float, ...] = (0.0,) + tuple(
      float(x) for x in np.geomspace(5e-6, 2e-3, 27))
  latency_factors: Tuple[float, ...] = (0.0, 0.1, 0.25, 0.5, 1.0, 2.0)
  overlap_latency: Tuple[bool, ...] = (False, True)
  compute_factors: Tuple[float, ...] = tuple(
      float(x) for x in np.geomspace(0.5, 1.25, 9))


def fit_overheads(graph: OpGraph, cluster: Cluster, calibration: Calibration,
                  measured: Sequence[Tuple[np.ndarray, float]],
                  search: OverheadSearch = OverheadSearch()) -> Calibration:
  """Fits compute factor, step and transfer overheads and the link model.

  For each candidate compute factor k (multiplying the op-record fit's
  compute scales: summed traced op times overstate a step's compute when
  ops overlap on one core, and tracing slows the traced step), the step
  overhead is the median measured - simulated step of the one-device runs
  (>= 0); the link model, latency and per-transfer overhead are then
  searched; the candidate with the smallest mean |log(predicted /
  measured)| over all runs wins.

  Args:
    graph: the measured graph.
    cluster: the cluster the runs used (uncalibrated).
    calibration: the op-time calibration (e.g. from `calibrate`).
    measured: (device ids [M], measured step seconds) per calibration run.
    search: the candidate values.

  Returns:
    `calibration` with the chosen compute scales, `step_overhead_s`,
    `transfer_overhead_s` for every device type of `cluster`,
    `overlap_latency` and (if it has links) link latency.

  Raises:
    MeasureError: no measured runs.
  """
  if not measured:
    raise MeasureError("fit_overheads needs measured calibration runs")
  ids = np.stack([np.asarray(d, dtype=np.int32) for d, _ in measured])
  meas = np.array([t for _, t in measured], dtype=np.float64)
  single = np.array([len(np.unique(row)) == 1 for row in ids])
  types = sorted({d.type for d in cluster.devices})
  best = None
  for k in search.compute_factors:
    base = dataclasses.replace(
        calibration, step_overhead_s=0.0,
        transfer_overhead_s={t: 0.0 for t in types},
        compute_scale={t: calibration.compute_scale.get(t, 1.0) * k
                       for t in types})
    sim = calibrated_simulator(graph, cluster, base)
    step = 0.0
    if single.any():
      gap = meas[single] - sim.simulate_batch(ids[single])
      step = max(0.0, float(np.median(gap)))
    base = dataclasses.replace(base, step_overhead_s=step)
    cands = ([base] if single.all() else
             _overhead_candidates(base, cluster, types, search))
    for cand in cands:
      pred = sim.with_cluster(apply_calibration(cluster, cand)).simulate_batch(
          ids)
      err = float(np.mean(np.abs(np.log(pred / meas))))
      if best is None or err < best[0] - 1e-12:
        best = (err, cand)
  err, fitted = best
  logging.info("%s: compute scale %s, step overhead %.3g s, transfer "
               "overhead %s, link latency %s, overlapped %s (mean |log "
               "ratio| %.3f on %d runs)", graph.name,
               dict(fitted.compute_scale), fitted.step_overhead_s,
               dict(fitted.transfer_overhead_s),
               {k: v.latency_s for k, v in fitted.links.items()},
               fitted.overlap_latency, err, len(meas))
  return fitted


def _overhead_candidates(base: Calibration, cluster: Cluster,
                         types: Sequence[str], search: OverheadSearch):
  """Calibrations with every (link model, latency factor, transfer
  overhead) triple."""
  kind = cluster.default_link.kind
  link = base.links.get(kind, cluster.default_link)
  factors = search.latency_factors if base.links else (1.0,)
  for overlap in search.overlap_latency:
    for factor in factors:
      links = dict(base.links)
      if links:
        links[kind] = LinkSpec(link.latency_s * factor, link.bandwidth, kind)
      for h in search.transfer_overheads_s:
        yield dataclasses.replace(base, links=links, overlap_latency=overlap,
                                  transfer_overhead_s={t: h for t in types})


# ---- the calibration flow on a running cluster ----------------------------


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
  ones of `tfplace.measurement.fidelity`)."""
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
class CalibrationRun:
  """One calibration placement: fitted prediction vs measured step time.

  Attributes:
    label: the placement's label ("all_on_1", "halves", "calib_random_0").
    predicted_s: the calibrated simulator's step time (seconds).
    measured_s: the measured median step time, None if the run failed.
    error: the failure message of a failed run.
  """
  label: str
  predicted_s: float
  measured_s: Optional[float]
  error: Optional[str] = None

  @property
  def abs_rel_error(self) -> Optional[float]:
    if self.measured_s is None or not np.isfinite(self.predicted_s):
      return None
    return abs(self.predicted_s - self.measured_s) / self.measured_s


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
  runs: Tuple[CalibrationRun, ...]
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
      CalibrationRun(label, float(pred),
                     o.timing.median_step_time_s if o.ok else None, o.error)
      for (label, _), pred, o in zip(labelled, predicted, outcomes))
  errors = [r.abs_rel_error for r in runs if r.abs_rel_error is not None]
  med = float(np.median(errors)) if errors else float("nan")
  return CalibrationReport(graph.name, graph.num_ops, calibration, runs, med,
                           dict(link_fits or {}))


def benchmark_link(cluster: Cluster, target: str, *,
                   sizes: Sequence[int] = comm_benchmark.DEFAULT_SIZES,
                   repeats: int = 7, progress: bool = True
                   ) -> Optional[LinkFit]:
  """Fits the link between the cluster's first two devices.

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
          src, dst, sizes=(nbytes,), target=target, repeats=repeats)
    fit = comm_benchmark.fit_link(samples)
  except MeasureError as e:
    logging.warning("link benchmark failed (%s); keeping the default link "
                    "%s", e, cluster.default_link)
    return None
  logging.info("link %s -> %s: latency %.3g s, bandwidth %.3g B/s (R^2 "
               "%.3f)", src, dst, fit.latency_s, fit.bandwidth, fit.r2)
  return fit


def calibrate_on_cluster(graph: OpGraph, cluster: Cluster, target: str, *,
                         num_random: int = 8, warmup: int = 2, steps: int = 5,
                         link: bool = True, seed: int = 0,
                         cache_dir: Optional[str] = None,
                         timeout_s: float = 120.0,
                         progress: bool = True) -> CalibrationReport:
  """Benchmarks the link, measures the calibration placements, fits.

  Args:
    graph: the graph to measure (a small one is enough; the calibration is
      usable with any graph, see the module docstring).
    cluster: the (uncalibrated) cluster of the running servers.
    target: the session target of the servers ("grpc://host:port").
    num_random: random group placements among the calibration runs.
    warmup: untimed steps per placement.
    steps: timed steps per placement (the median is used).
    link: run the link benchmark (else keep the cluster's default link).
    seed: seed of the random placements.
    cache_dir: measurement cache directory.
    timeout_s: limit per measured placement.
    progress: show tqdm bars.

  Returns:
    The calibration and its in-sample error on the calibration runs.

  Raises:
    MeasureError: no calibration run succeeded.
  """
  link_fit = (benchmark_link(cluster, target, progress=progress)
              if link else None)
  labelled = calibration_placements(graph, cluster, seed, num_random)
  outcomes = measure_batch(graph, [p for _, p in labelled], cluster=cluster,
                           target=target, warmup=warmup, steps=steps,
                           cache_dir=cache_dir, timeout_s=timeout_s,
                           progress=progress)
  link_fits = {cluster.default_link.kind: link_fit} if link_fit else None
  return report_from_runs(graph, cluster, labelled, outcomes, link_fits)
