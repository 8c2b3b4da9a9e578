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
"""

import dataclasses
from typing import Dict, List, Optional, Sequence

from absl import logging
import numpy as np

from tfplace.cost.analytical import AnalyticalConfig, AnalyticalCostModel
from tfplace.cost.cluster import Cluster, LinkSpec
from tfplace.cost.profiled import Calibration
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
