"""Fit the simulator to measured op times: a `Calibration`.

The analytical model predicts op i on device d as r_i + k_i * o_d (roofline
seconds r_i, launch overhead o_d, k_i = 1, or the trivial-op factor). The
calibrated model (`tfplace.cost.calibrated.CalibratedCostModel`) predicts

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

The whole flow on a running TF server cluster (placements, measurements,
these fits) is `tfplace.measurement.calibration_runs.calibrate_on_cluster`.

A calibration is usable with any graph: `compute_scale`, the overheads and
the links describe the devices; `op_type_scale` holds factors only for op
types with enough samples, and applies to any graph's ops of those types,
while ops of other types get the device-type scale alone.
"""

import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

from absl import logging
import numpy as np

from tfplace.cost.analytical import AnalyticalConfig, AnalyticalCostModel
from tfplace.cost.cluster import Cluster, LinkSpec
from tfplace.cost.op_costs import OpCosts
from tfplace.cost.calibrated import (Calibration, CalibratedCostModel,
                                   apply_calibration)
from tfplace.simulator.simulator import Simulator
from tfplace.errors import MeasureError
from tfplace.graph.op_graph import OpGraph
from tfplace.measurement.comm_benchmark import LinkFit
from tfplace.measurement.runner import StepTiming


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
    A `tfplace.cost.calibrated.Calibration`.

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
