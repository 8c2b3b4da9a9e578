"""Fit a `Calibration` from measured op durations and the cluster's
microbenchmarks.

What is measured is not fitted: the devices' rates, the per-op launch
overhead, the per-message host cost, link latency and bandwidth and the
empty step come from `tfplace.measurement.cluster_benchmark`. What is fitted
is per op type and device type: the op's time beyond the launch overhead,

    fixed_s + scale * roofline_s

(`roofline_s`: `AnalyticalCostModel.work_seconds` at the measured rates),
from the op durations of traced one-device steps (`StepTiming.op_records`;
on a multi-core CPU a wide op's duration as if it ran alone:
`op_concurrency.solo_durations`) less the tracer's cost per op
(`DeviceBenchmark.traced_op_s`). Each fit is a
robust (soft-L1) least squares on log ratios (predicted + r) / (measured +
r), r the tracer's 1 us resolution, with a weak prior
pulling `scale` to 1 (when all an op type's work is below the tracer's
resolution, scale is 1 and its time the fixed part),
inside physical bounds (`FitBounds`): the fixed part never exceeds the
mean duration of the type's smaller executions (those with at most the
median work: so it cannot absorb the compute of larger ones) nor
`max_fixed_s`, and the scale stays within [`min_scale`, `max_scale`].
An op type whose executions all do about the same work (within
`FitBounds.min_work_span`) cannot tell a fixed part from a rate: its
fixed part is bounded by the median fixed part of the types whose work
spans sizes, and its scale takes the rest. Left to the prior, the rest
went to the fixed part: Adam's dense update of the suite's embedding
tables (AssignSubVariableOp, 61 us traced at 12 us of roofline) fitted a
55 us fixed part, and MobileNetV2's 104 batch-norm moving averages of the
same type, under 0.1 us of roofline each, were charged it: 5.2 ms more
in a one-worker step (WORKSPACE_NOTES.md, issue 13).
Convolutions (`CONV_OP_TYPES`) are then predicted from their measured
curve (`measured_curve`: time against roofline at knots, each the median
of three executions in the order of their work, interpolated in log-log):
the suite measures them from 0.01 to 1,200 MFLOP, and their time is no
line in the work. Those under ~1 MFLOP cost 13-70 us whatever
their work, the 2-60 MFLOP ones 1.5-2.5x their roofline, the largest
1.0-1.2x; a fixed part and one scale cannot follow that bend, and the ones
in the bend (small_cnn's, 1-2 MFLOP: 2x under) were the misses. Judged on
ten fixed cross records (testdata/cross_records; WORKSPACE_NOTES.md, issue
13), the median over records of resnet_like's, resnet_large's and
small_cnn's median error fell (see the notes), and the targets met stayed
the same but for one Spearman cell of the 70 (small_cnn 0.93 -> 0.87).
Their fixed part and scale are kept (the scale where the work is: the
work-weighted median of (measured - fixed) / roofline) and used only where
no curve could be built. A convolution with a stride above 1 (`Op.stride`)
is slower at the same roofline where it is small: a stride-2
Conv2DBackpropInput of 10-90 us of work took 3-9x it, a stride-1 one
1.5-3x. Where the suite measured strided executions of a type, they give
that type a second curve, used for strided ops (`OpTypeCost.variants`
under `STRIDED`); the type's own curve stays fitted on all executions
(fitted on the stride-1 ones alone, it moved resnet_like's one-worker
prediction from 1.09x to 1.20x over seventeen records).
Two kinds of execution of a type cost far from its other executions at
the same roofline (`Op.variant`): an einsum with batch indices
(attention's scores and context) runs one small matrix product per batch
index, 3-6x the time of the projections at the same roofline, which are
one large product; a fused batch norm over NCHW data (Keras's layer
normalization) took 4-5x what the fit of the NHWC ones (after
convolutions) predicts (a Keras transformer's traced step,
WORKSPACE_NOTES.md). Where the suite measured both kinds of a type, each
variant gets a fit of its own (`OpTypeCost.variants`) and the type's fit
is its plain executions'. So do convolution filter gradients with a
narrow window (filter rows x columns x input channels under 144: 1x1
filters, first layers), which multiply a narrow matrix: on the suite's
records they ran at 60-93 GFLOP/s against 127-200 for 3x3 filters over
16-64 channels at the same work, and in one curve the narrow ones set the
knots where resnet_like's 3x3 gradients sit (predicted 1.75x their traced
time; 1.20x with their own curves; WORKSPACE_NOTES.md, issue 13). Each
such variant gets a curve of its own; the strided curve still takes every
strided execution and comes first. MatMuls by a transposed right operand
(dense layers' input gradients: 1.9x their roofline in the suite, the
others 1.2-1.3x; `op_reader.cost_variant`) get a fit of their own too.
A batched matmul or einsum runs one small matrix product per batch index
(`Op.matrix_products`), and on a CPU each costs a fixed time beyond its
FLOPs: the suite's attention einsums (16-64 products of 16x16 to 64x32
matrices) fitted 0.37-0.68 us per product on 19 of 21 records. A type
some of whose executions ran several products gets that cost per product
(`OpTypeCost.per_product_s`) besides its fixed part and scale. Without it
the large products set the scale and the fixed part absorbed the rest:
keras_transformer's 64-product einsums were predicted at 0.72 of their
traced time (1.04 with it), its one-worker step at 0.84 of its measured
time (0.90; WORKSPACE_NOTES.md, issue 13). A launch-bound device runs a
batched product as one kernel: there every sample counts one product.
What is fitted about transfers, on a cluster with the link model, is two
shares of measured figures, chosen on the suite's split runs
(`fit_transfer_figures`): how much of the measured per-message cost each end
pays, and how much of the measured time per byte is host work (it blocks
the workers' compute) rather than link time. On a cluster with rendezvous
transfers (one-core TF server workers) each end pays the measured
per-message cost, the sender its measured time per byte, at the times the
simulator's message rule gives (`simulator.kernel`). A share fitted there
absorbed other errors: the suite's
split runs chose 0.7-1.0, and judged on five fixed sets of measurements of
graphs the fit never saw, the measured cost (share 1.0) met the error
target on as many graphs or more in each set, with a lower median error
in four (WORKSPACE_NOTES.md, issue 13). What is fitted there is an extra
latency per message (host work, half at each end; 0-120 us), the bias of
the suite's split runs: a loopback message inside a step can cost more
than the idle fan-out and ping-pong show. On this project's machine the
fit chose 0 on 26 of 30 older records (15 us on four), and 0-120 us on
the records taken after the machine changed (its ping-pong hop no longer
exceeded two fan-out costs, and the judged splits were under-predicted by
~50 us per message; WORKSPACE_NOTES.md, issue 13, 2026-11-27).

One figure per device type is fitted from step times, on small graphs
only (`fit_trace_excess`): the profiler costs a real op more than the
benchmark's tiny scalar op (whose traced time is taken off every op
record), so the op records overstate the ops of an untraced step; the
excess per op is what the one-device steps of the suite's small graphs
(under `FitBounds.small_step_s`, where per-op costs decide the step) are
over-predicted by, per op. Taken off every op's cost it carries over to
graphs the fit never saw (WORKSPACE_NOTES.md, issue 13).

On a launch-bound device (an accelerator whose benchmark measured launch
costs per kind, `DeviceBenchmark.launch_s`) the op types are fitted on the
traced kernel times (`OpRecord.kernel_s`), and the launches are the
benchmark's untraced figures (`tfplace.cost.calibrated`): the GPU tracer
makes a launch 2-10x longer, and no per-op or per-byte excess explained by
how much (WORKSPACE_NOTES.md, "GPUs"). There op types whose executions ran
no kernel are listed (`Calibration.kernel_free`), no trace excess is
fitted, and two figures are read off the one-device runs instead: the
stall per step (`fit_stall`: the long idle gaps of the traced steps) and
the dispatch per op (`fit_dispatch`: what the steps are still
under-predicted by, per op).

Step times never enter the op-type fit: they judge it (`calibration_runs`
reports the in-sample error of every calibration run).
"""

import dataclasses
from typing import (Collection, Dict, Iterator, List, Mapping, Optional,
                    Sequence, Tuple)

from absl import logging
import numpy as np

from tfplace.cost.analytical import CONV_OP_TYPES, AnalyticalCostModel
from tfplace.cost.calibrated import (DEVICE_RATES, STRIDED, Calibration,
                                     CalibratedCostModel, OpTypeCost,
                                     apply_calibration)
from tfplace.cost.cluster import Cluster, LinkSpec
from tfplace.cost.op_costs import OpCosts
from tfplace.errors import MeasureError
from tfplace.graph.op_graph import OpGraph
from tfplace.measurement.cluster_benchmark import ClusterBenchmark
from tfplace.measurement.op_concurrency import solo_durations
from tfplace.measurement.timing import StepTiming
from tfplace.simulator.simulator import Simulator


@dataclasses.dataclass(frozen=True)
class OpSample:
  """One traced op execution next to the analytical model's roofline.

  Attributes:
    op_type: TF op type.
    device_type: "CPU", "GPU", ...
    work_s: roofline seconds at the device's measured rates.
    measured_s: traced duration less the tracer's cost per op (>= 0).
    strided: the op has a stride above 1 (`Op.stride`).
    variant: the op's `Op.variant` ("batched", "channels_first",
      "narrow_window", "transpose_b" or "").
    matrix_products: the op's `Op.matrix_products`.
    in_loop: a node a While loop ran (`loop_samples`): used only for op
      types no top-level op of the device type samples.
  """
  op_type: str
  device_type: str
  work_s: float
  measured_s: float
  strided: bool = False
  variant: str = ""
  matrix_products: int = 1
  in_loop: bool = False


@dataclasses.dataclass(frozen=True)
class FitBounds:
  """Physical bounds and the prior of the per-op-type fit.

  Attributes:
    max_fixed_s: the most an op type may cost per execution whatever its
      size, beyond the launch overhead (also bounded by the mean duration of
      its smaller executions).
    min_scale: the fastest an op may run relative to its roofline at the
      measured rates (below 1: data in caches beats the copy bandwidth).
    max_scale: the slowest (heavy per-element work: random numbers,
      transcendental functions, small inefficient kernels).
    prior_weight: weight of the prior `scale = 1`, relative to one sample.
    resolution_s: the tracer's time resolution, added to predicted and
      measured times in the log ratios (differences far below it count
      little).
    small_step_s: the one-device steps `fit_trace_excess` learns from are
      at most this long (graphs of many small ops).
    max_trace_excess_s: the most the profiler may add to an op beyond the
      benchmark's tiny op (the benchmark measured 0.4-1.9 us).
    max_dispatch_s: the most the executor may spend per op of a real graph
      on a launch-bound device beyond the benchmark's chains.
    stall_gap_s: the shortest idle gap between a launch-bound device's op
      records that counts as a stall (`fit_stall`; ten times a kernel-free
      op's traced time).
    min_work_span: the least ratio of the largest to the smallest work of a
      type's executions (work above `resolution_s`) from which the fit
      tells its fixed part from its scale (see the module docstring).
  """
  max_fixed_s: float = 1e-4
  min_scale: float = 0.05
  max_scale: float = 1000.0
  prior_weight: float = 0.3
  resolution_s: float = 1e-6
  small_step_s: float = 3e-3
  max_trace_excess_s: float = 5e-6
  max_dispatch_s: float = 2e-5
  stall_gap_s: float = 4e-5
  min_work_span: float = 2.0


def samples_from_timing(graph: OpGraph, cluster: Cluster, timing: StepTiming,
                        traced_op_s: Mapping[str, float],
                        kernel_devices: Collection[str] = ()
                        ) -> List[OpSample]:
  """Pairs each traced op of a step with its roofline seconds.

  Args:
    graph: the measured graph.
    cluster: the measured cluster (`ClusterBenchmark.apply`), whose rates
      give the roofline.
    timing: the measured step (its `op_records`).
    traced_op_s: device name -> the tracer's cost per op on it.
    kernel_devices: launch-bound devices: there the sample is the op's
      kernel time, 0 for an op that ran none (where the step recorded no
      kernel on the device at all, its records are left out).

  Returns:
    One sample per traced op of the training step on a cluster device.
  """
  work = AnalyticalCostModel().work_seconds(graph, cluster)
  out = []
  for i, j, measured in traced_op_times(graph, cluster, timing, traced_op_s,
                                        kernel_devices):
    if not np.isfinite(work[i, j]):
      continue
    op = graph.ops[i]
    # A launch-bound device runs a batched product as one kernel.
    products = (1 if cluster.devices[j].name in kernel_devices
                else op.matrix_products)
    out.append(OpSample(op.type, cluster.devices[j].type, float(work[i, j]),
                        measured, op.stride > 1, op.variant, products))
  return out


def traced_op_times(graph: OpGraph, cluster: Cluster, timing: StepTiming,
                    traced_op_s: Mapping[str, float],
                    kernel_devices: Collection[str] = ()
                    ) -> Iterator[Tuple[int, int, float]]:
  """(op index, device index, seconds) of each traced op of the training
  step on a cluster device, as the op-type fit reads it: its duration as
  if alone (`op_concurrency`) less the tracer's cost per op, or on a
  launch-bound device (`kernel_devices`) its kernel time (see
  `samples_from_timing`)."""
  # Launch-bound devices whose tracer recorded kernels in this step: there
  # an op without a kernel time ran none.
  traced_kernels = {r.device for r in timing.op_records
                    if r.kernel_s is not None and r.device in kernel_devices}
  # A wide op traced beside others, as if alone (`op_concurrency`; on a
  # launch-bound device the kernel time below is used instead).
  solo = solo_durations(timing.op_records)
  for rec, solo_s in zip(timing.op_records, solo):
    i = graph.index.get(rec.name)
    j = cluster.device_index.get(rec.device)
    if i is None or j is None or not graph.step_mask[i]:
      continue
    device = cluster.devices[j]
    if device.name in kernel_devices:
      if device.name not in traced_kernels:
        continue
      yield i, j, rec.kernel_s or 0.0
    else:
      yield i, j, max(0.0, solo_s - traced_op_s.get(device.name, 0.0))


def fit_op_type(samples: Sequence[OpSample],
                bounds: FitBounds = FitBounds()) -> OpTypeCost:
  """Fits `fixed_s + scale * work_s` to the samples of one op type, plus
  `per_product_s` per matrix product where some execution ran several
  (`OpSample.matrix_products`; see the module docstring).

  Raises:
    MeasureError: no samples.
  """
  from scipy import optimize
  if not samples:
    raise MeasureError("an op-type fit needs samples")
  w = np.array([s.work_s for s in samples], dtype=np.float64)
  m = np.array([s.measured_s for s in samples], dtype=np.float64)
  n = np.array([s.matrix_products for s in samples], dtype=np.float64)
  hi_fixed = min(bounds.max_fixed_s, _typical_small(w, m))
  eps = bounds.resolution_s
  # Unknowns: the fixed part (and the cost per product) in units of
  # `unit`, and log(scale): all of order 1, whatever the magnitudes.
  unit = max(hi_fixed, bounds.resolution_s)
  lo_u, hi_u = np.log(bounds.min_scale), np.log(bounds.max_scale)
  # Work the tracer cannot resolve cannot tell a scale: fitted, it follows
  # the noise of the fixed part (the suite's 10-class softmax, 0.03 us of
  # work, once fitted a scale of 115 and put rnnlm's 1000-class one at 5x
  # its time). Then the scale is the roofline's.
  scaled = bool(np.any(w >= bounds.resolution_s))
  per_product = bool(np.any(n > 1))

  def residuals(p):
    pred = p[0] * unit + (np.exp(p[1]) if scaled else 1.0) * w
    if per_product:
      pred = pred + p[2] * unit * n
    return np.append(np.log((pred + eps) / (m + eps)),
                     bounds.prior_weight * p[1])

  ratio = m[w > 0] / w[w > 0]
  guesses = [(0.5 * hi_fixed / unit, 0.0),
             (0.0, float(np.log(np.median(ratio))) if ratio.size and
              np.median(ratio) > 0 else 0.0)]
  lower, upper = [0.0, lo_u], [max(hi_fixed / unit, 1e-12), hi_u]
  if per_product:
    # A product costs at most what the fixed part may (the small
    # executions' time).
    lower.append(0.0)
    upper.append(upper[0])
  best = None
  for f0, u0 in guesses:
    x0 = [float(np.clip(f0, 0.0, hi_fixed / unit)),
          float(np.clip(u0, lo_u, hi_u))] + [0.0] * per_product
    fit = optimize.least_squares(residuals, x0, bounds=(lower, upper),
                                 loss="soft_l1", f_scale=0.5)
    if best is None or fit.cost < best.cost:
      best = fit
  fixed = float(np.clip(best.x[0] * unit, 0.0, hi_fixed))
  scale = float(np.clip(np.exp(best.x[1]) if scaled else 1.0,
                        bounds.min_scale, bounds.max_scale))
  product = float(np.clip(best.x[2] * unit, 0.0, hi_fixed)) if (
      per_product) else 0.0
  return OpTypeCost(fixed_s=fixed, scale=scale, samples=len(samples),
                    per_product_s=product)


def _typical_small(work: np.ndarray, measured: np.ndarray) -> float:
  """The typical (mean) measured time of the executions with at most the
  median work: a fixed cost above it would eat their compute."""
  small = work <= np.median(work)
  return float(max(0.0, measured[small].mean()))


def _fit_one_type(op_type: str, samples: Sequence[OpSample],
                  bounds: FitBounds) -> OpTypeCost:
  """`fit_op_type`, or for a convolution `_fit_conv` (its measured curve)
  with the strided executions' apart where they give a curve of their own;
  for every type each `Op.variant` apart from the plain executions where
  both were measured (a convolution's where it gives a curve; see the
  module docstring)."""
  conv = op_type in CONV_OP_TYPES
  fit_one = _fit_conv if conv else fit_op_type
  plain = [s for s in samples if not s.variant]
  fit = fit_one(plain or samples, bounds)
  variants = {}
  strided = [s for s in samples if s.strided]
  if conv and strided and len(strided) < len(samples):
    strided_fit = _fit_conv(strided, bounds)
    if strided_fit.curve_work_s:
      variants[STRIDED] = strided_fit
  if plain:
    for v in sorted({s.variant for s in samples} - {""}):
      variant_fit = fit_one([s for s in samples if s.variant == v], bounds)
      if variant_fit.curve_work_s or not conv:
        variants[v] = variant_fit
  return dataclasses.replace(fit, variants=variants) if variants else fit


def _fit_conv(samples: Sequence[OpSample], bounds: FitBounds) -> OpTypeCost:
  """`fit_op_type`, the scale where the work is and the measured curve."""
  fit = fit_op_type(samples, bounds)
  work = np.array([s.work_s for s in samples], dtype=np.float64)
  measured = np.array([s.measured_s for s in samples], dtype=np.float64)
  keep = work > 0
  if not keep.any():
    return fit
  scale = _weighted_median((measured[keep] - fit.fixed_s) / work[keep],
                           work[keep])
  knots_work, knots_time = measured_curve(
      work[keep], np.maximum(measured[keep], bounds.resolution_s))
  return dataclasses.replace(
      fit, scale=float(np.clip(scale, bounds.min_scale, bounds.max_scale)),
      curve_work_s=knots_work, curve_time_s=knots_time)


# Executions per knot of a measured curve (the suite's 30 executions of a
# convolution type give 10 knots; with 4 per knot, 8 knots, resnet_like's
# median error over the eight records of WORKSPACE_NOTES.md rose from 7.5
# to 9.4 % and one record lost a target: read the curve as this coarse).
CURVE_KNOT_SAMPLES = 3
# Two executions per knot where `CURVE_KNOT_SAMPLES` would leave fewer
# knots than this (a suite with strided convolutions of 3 sizes, each
# measured twice).
MIN_CURVE_KNOTS = 3


def measured_curve(work: np.ndarray, measured: np.ndarray
                   ) -> Tuple[Tuple[float, ...], Tuple[float, ...]]:
  """Knots of time against roofline: the executions sorted by work, in
  bins of `CURVE_KNOT_SAMPLES` (the last may hold fewer), each bin's median
  work and median time (medians of the logs); a knot whose
  work does not exceed the one before is dropped, and the times are made
  non-decreasing (more work never takes less time). Empty when fewer than
  two knots remain.

  Args:
    work: roofline seconds per execution (> 0).
    measured: measured seconds per execution (> 0).
  """
  # The most executions per knot (at least two) that still leave
  # MIN_CURVE_KNOTS knots.
  per_knot = max(2, min(CURVE_KNOT_SAMPLES,
                        (len(work) - 1) // (MIN_CURVE_KNOTS - 1)))
  order = np.argsort(work, kind="stable")
  log_work, log_time = np.log(work[order]), np.log(measured[order])
  knots_work, knots_time = [], []
  for lo in range(0, len(work), per_knot):
    w = float(np.median(log_work[lo:lo + per_knot]))
    if knots_work and w <= knots_work[-1]:
      continue
    knots_work.append(w)
    knots_time.append(float(np.median(
        log_time[lo:lo + per_knot])))
  if len(knots_work) < 2:
    return (), ()
  knots_time = np.maximum.accumulate(knots_time)
  return (tuple(float(x) for x in np.exp(knots_work)),
          tuple(float(x) for x in np.exp(knots_time)))


def _weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
  """The value at which half of the total weight is reached."""
  order = np.argsort(values)
  cumulative = np.cumsum(weights[order])
  return float(values[order][np.searchsorted(cumulative,
                                             0.5 * cumulative[-1])])


def fit_op_types(samples: Sequence[OpSample],
                 bounds: FitBounds = FitBounds()
                 ) -> Dict[str, Dict[str, OpTypeCost]]:
  """`fit_op_type` per (device type, op type) of the samples (a
  convolution's scale then from where its work is: see the module
  docstring).

  Raises:
    MeasureError: no samples.
  """
  if not samples:
    raise MeasureError("calibration needs traced op records; none given")
  groups: Dict[str, Dict[str, List[OpSample]]] = {}
  for s in samples:
    if not s.in_loop:
      groups.setdefault(s.device_type, {}).setdefault(s.op_type, []).append(s)
  # A loop's nodes only for the types no top-level op samples (see
  # `loop_samples`): a loop's fused kernels and its many small executions
  # leave the top-level fits as they were.
  top = {(d, t) for d, per_type in groups.items() for t in per_type}
  for s in samples:
    if s.in_loop and (s.device_type, s.op_type) not in top:
      groups.setdefault(s.device_type, {}).setdefault(s.op_type, []).append(s)
  out = {dtype: _fit_device_type(per_type, bounds)
         for dtype, per_type in groups.items()}
  for dtype, fits in out.items():
    logging.info("calibration %s: %d op types from %d op records", dtype,
                 len(fits), sum(f.samples for f in fits.values()))
  return out


def _fit_device_type(per_type: Mapping[str, List[OpSample]],
                     bounds: FitBounds) -> Dict[str, OpTypeCost]:
  """`_fit_one_type` for each op type of one device type; a type of one
  size (`_one_size`) with its fixed part bounded by the median fixed part
  of the types whose work spans sizes."""
  one_size = {t for t, group in per_type.items() if _one_size(group, bounds)}
  fits = {t: _fit_one_type(t, group, bounds)
          for t, group in sorted(per_type.items()) if t not in one_size}
  spanning = [f.fixed_s for t, f in fits.items()
              if _resolved(per_type[t], bounds)]
  capped = dataclasses.replace(bounds, max_fixed_s=min(
      bounds.max_fixed_s, float(np.median(spanning)))) if spanning else bounds
  fits.update((t, _fit_one_type(t, per_type[t], capped))
              for t in sorted(one_size))
  return dict(sorted(fits.items()))


def _resolved(samples: Sequence[OpSample], bounds: FitBounds) -> bool:
  """True if some execution's work reaches the tracer's resolution (a
  rate can show in its times)."""
  return any(s.work_s >= bounds.resolution_s for s in samples)


def _one_size(samples: Sequence[OpSample], bounds: FitBounds) -> bool:
  """True if the executions' work is resolved but spans less than
  `min_work_span` (the fit cannot tell fixed part from scale)."""
  if not _resolved(samples, bounds):
    return False
  work = [s.work_s for s in samples]
  return max(work) < bounds.min_work_span * max(min(work), 1e-300)


def kernel_free_types(samples: Sequence[OpSample],
                      device_types: Collection[str]
                      ) -> Dict[str, Tuple[str, ...]]:
  """Per device type of `device_types` (launch-bound), the op types whose
  every sample there ran no kernel (`Calibration.kernel_free`)."""
  ran: Dict[str, Dict[str, bool]] = {}
  for s in samples:
    if s.device_type in device_types:
      per_type = ran.setdefault(s.device_type, {})
      per_type[s.op_type] = per_type.get(s.op_type, False) or (
          s.measured_s > 0)
  return {t: tuple(sorted(k for k, v in per_type.items() if not v))
          for t, per_type in ran.items()}


def calibration_from_benchmark(
    bench: ClusterBenchmark, cluster: Cluster,
    op_types: Optional[Mapping[str, Mapping[str, OpTypeCost]]] = None,
    notes: str = "",
    kernel_free: Optional[Mapping[str, Tuple[str, ...]]] = None,
    loop_op_types: Optional[Mapping[str, Mapping[str, OpTypeCost]]] = None
) -> Calibration:
  """A calibration holding the measured figures (medians per device type)
  and the fitted op types.

  Args:
    bench: the cluster's microbenchmarks.
    cluster: the cluster they ran on (device types and link kind).
    op_types: the per-op-type fits (none: an uncalibrated, measured-only
      calibration).
    notes: free text.
    kernel_free: `Calibration.kernel_free` (launch-bound device types).
    loop_op_types: `Calibration.loop_op_types`.
  """
  measured = bench.apply(cluster)
  by_type: Dict[str, list] = {}
  for d in measured.devices:
    by_type.setdefault(d.type, []).append(d)

  def median(devices, field):
    return float(np.median([getattr(d, field) for d in devices]))

  rates = {t: {r: median(ds, r) for r in DEVICE_RATES if median(ds, r) > 0}
           for t, ds in by_type.items()}
  launch = {}
  for t, ds in by_type.items():
    names = {x.name for x in ds}
    measured_launch = [d.launch_s for d in bench.devices
                       if d.device in names and d.launch_s]
    if measured_launch:
      kinds = set(measured_launch[0]).intersection(*measured_launch)
      launch[t] = {k: float(np.median([m[k] for m in measured_launch]))
                   for k in sorted(kinds)}
  links = {}
  if bench.links:
    links[cluster.default_link.kind] = LinkSpec(
        float(np.median([l.latency_s for l in bench.links])),
        float(np.median([l.bandwidth for l in bench.links])),
        cluster.default_link.kind)
  return Calibration(
      launch_overhead_s={t: median(ds, "launch_overhead_s")
                         for t, ds in by_type.items()},
      transfer_overhead_s={t: median(ds, "transfer_overhead_s")
                           for t, ds in by_type.items()},
      transfer_byte_s={t: median(ds, "transfer_byte_s")
                       for t, ds in by_type.items()},
      # Over the devices that measured one (a profile may miss a worker).
      recv_issue_s={t: median([d for d in ds if d.recv_issue_s > 0],
                              "recv_issue_s")
                    for t, ds in by_type.items()
                    if any(d.recv_issue_s > 0 for d in ds)},
      links=links, step_overhead_s=measured.step_overhead_s,
      run_overhead_s={d.name: d.run_overhead_s for d in measured.devices},
      overlap_latency=measured.overlap_latency,
      rendezvous_transfers=measured.rendezvous_transfers, device_rates=rates,
      op_types={t: dict(v) for t, v in (op_types or {}).items()},
      launch_s=launch, kernel_free=dict(kernel_free or {}), notes=notes,
      loop_op_types={t: dict(v) for t, v in (loop_op_types or {}).items()})


# Shares of the measured per-message cost charged to each end, and of the
# measured time per byte spent by the hosts, tried by `fit_transfer_figures`;
# on rendezvous clusters, the extra latency per message (host work, half
# at each end) tried instead: 0-120 us, up to about one ping-pong hop.
MESSAGE_SHARES = tuple(float(x) for x in np.linspace(0.5, 1.0, 11))
BYTE_SHARES = tuple(float(x) for x in np.linspace(0.0, 0.9, 10))
EXTRA_LATENCIES_S = tuple(float(x) * 1e-6 for x in range(0, 121, 15))


def fit_transfer_figures(cluster: Cluster, bench: ClusterBenchmark,
                         op_types: Mapping[str, Mapping[str, OpTypeCost]],
                         split_runs: Sequence[tuple],
                         shares: Optional[Sequence[float]] = None,
                         byte_shares: Optional[Sequence[float]] = None,
                         extra_latencies_s: Optional[Sequence[float]] = None,
                         loop_op_types: Optional[
                             Mapping[str, Mapping[str, OpTypeCost]]] = None
                         ) -> Tuple[float, float, float]:
  """What of the measured transfer figures best predicts multi-device runs
  (`ClusterBenchmark.with_message_share`): on a link-model cluster the
  share of the measured per-message cost each end pays and the share of
  the measured time per byte the hosts spend (the smallest mean
  |log(predicted / measured)| over the grid); on a cluster with rendezvous
  transfers the extra latency per message (host work, half at each end;
  the receiver's half where the message wakes it)
  beyond the idle benchmarks' (the smallest |median log(predicted /
  measured)|: the runs' bias; the smallest candidate on ties).

  Args:
    cluster: the uncalibrated cluster.
    bench: its microbenchmarks.
    op_types: the fitted op types.
    split_runs: (graph, device ids [M], measured step seconds) per run.
    shares: the message-share candidates, within the physical range [0.5,
      1]; default `MESSAGE_SHARES`, or only 1 when the cluster has
      rendezvous transfers (each end pays the measured cost).
    byte_shares: the byte-share candidates, within [0, 1); default
      `BYTE_SHARES`, or only 0 when the cluster has rendezvous transfers
      (the time a send holds its sender already is the work per byte).
    extra_latencies_s: the extra-latency candidates (>= 0); default
      `EXTRA_LATENCIES_S` when the cluster has rendezvous transfers, else
      only 0.
    loop_op_types: the op types fitted on loop bodies.

  Returns:
    (message share, byte share, extra latency); (1.0, 0.0, 0.0) when there
    are no runs to judge by.
  """
  if not split_runs:
    return 1.0, 0.0, 0.0
  rendezvous = cluster.rendezvous_transfers
  if shares is None:
    shares = (1.0,) if rendezvous else MESSAGE_SHARES
  if byte_shares is None:
    byte_shares = (0.0,) if rendezvous else BYTE_SHARES
  if extra_latencies_s is None:
    extra_latencies_s = EXTRA_LATENCIES_S if rendezvous else (0.0,)
  grid = [(a, b, c) for a in shares for b in byte_shares
          for c in sorted(extra_latencies_s)]
  if len(grid) == 1:
    return tuple(float(x) for x in grid[0])
  # The op costs do not depend on the figures: computed once per graph.
  plain = calibration_from_benchmark(bench, cluster, op_types,
                                     loop_op_types=loop_op_types)
  base = apply_calibration(cluster, plain)
  graphs = {id(g): g for g, _, _ in split_runs}
  costs = {k: CalibratedCostModel(plain).op_costs(g, base)
           for k, g in graphs.items()}
  best = None
  for share, byte_share, extra in grid:
    calibration = calibration_from_benchmark(
        bench.with_message_share(share, byte_share, extra), cluster,
        op_types)
    logs = [np.log(calibrated_simulator(
        graph, cluster, calibration, costs[id(graph)]).simulate(
            ids).step_time_s / measured)
            for graph, ids, measured in split_runs]
    # Shares: the mean |log|, not the median (the few runs that move large
    # tensors are the ones that tell the byte share). The extra latency
    # moves every split run the same way: their median, the bias.
    err = (abs(float(np.median(logs))) if rendezvous
           else float(np.mean(np.abs(logs))))
    if best is None or err < best[0] - 1e-12:
      best = (err, share, byte_share, extra)
  logging.info("per-message cost share %.2f, per-byte host share %.2f, "
               "extra latency per message %.0f us (error %.3f on %d split "
               "runs)", best[1], best[2], best[3] * 1e6, best[0],
               len(split_runs))
  return best[1], best[2], best[3]


def fit_trace_excess(cluster: Cluster, calibration: Calibration,
                     one_device_runs: Sequence[tuple],
                     bounds: FitBounds = FitBounds()) -> Dict[str, float]:
  """Device type -> the seconds per op by which `calibration` over-predicts
  the short one-device steps: the median over runs of (predicted -
  measured) / ops, within [0, `bounds.max_trace_excess_s`]
  (`Calibration.trace_excess_s`; see the module docstring). Launch-bound
  device types are left out (their costs are untraced figures).

  Args:
    cluster: the uncalibrated cluster.
    calibration: the calibration to correct (without an excess).
    one_device_runs: (graph, device ids [M], measured step seconds) of runs
      on one device; those longer than `bounds.small_step_s` are left out.
    bounds: the bounds.

  Returns:
    The excess of each device type with a short run (none: empty).
  """
  types = {d.type for d in cluster.devices} - set(calibration.launch_s)
  misses = _per_op_misses(cluster, calibration, one_device_runs, bounds,
                          types)
  return {t: float(np.clip(np.median(v), 0.0, bounds.max_trace_excess_s))
          for t, v in misses.items()}


def fit_dispatch(cluster: Cluster, calibration: Calibration,
                 one_device_runs: Sequence[tuple],
                 bounds: FitBounds = FitBounds()) -> Dict[str, float]:
  """Launch-bound device type -> the seconds per op by which `calibration`
  under-predicts the short one-device steps: the median over runs of
  (measured - predicted) / ops, within [0, `bounds.max_dispatch_s`]
  (`Calibration.dispatch_s`: the executor's work per op in a real graph
  that a chain of ops, launched inline one after the other, does not
  show).

  Args: as `fit_trace_excess`.
  """
  misses = _per_op_misses(cluster, calibration, one_device_runs, bounds,
                          set(calibration.launch_s))
  return {t: float(np.clip(-np.median(v), 0.0, bounds.max_dispatch_s))
          for t, v in misses.items()}


def fit_stall(timings: Sequence[Tuple[str, StepTiming]],
              launch_types: Collection[str],
              bounds: FitBounds = FitBounds()) -> Dict[str, float]:
  """Launch-bound device type -> the median over its one-device runs of the
  traced step's stalls: the idle time in gaps of at least
  `bounds.stall_gap_s` between one op record's end (the latest so far) and
  the next one's start (`Calibration.stall_s`). On the H200 every
  one-device GPU step waited 120-350 us before its first random input op
  and 50-130 us before the loss gradient's Tile, whatever its size: a
  cost per step that neither the empty step nor a chain of ops has.

  Args:
    timings: (device type, traced timing) of each one-device run.
    launch_types: the launch-bound device types.
    bounds: the bounds.
  """
  stalls: Dict[str, List[float]] = {}
  for device_type, timing in timings:
    if device_type not in launch_types or not timing.op_records:
      continue
    end, idle = None, 0.0
    for r in sorted(timing.op_records, key=lambda r: r.start_s):
      if end is not None and r.start_s - end >= bounds.stall_gap_s:
        idle += r.start_s - end
      end = max(end or 0.0, r.start_s + r.duration_s)
    stalls.setdefault(device_type, []).append(idle)
  return {t: float(np.median(v)) for t, v in stalls.items()}


def _per_op_misses(cluster: Cluster, calibration: Calibration,
                   one_device_runs: Sequence[tuple], bounds: FitBounds,
                   device_types: Collection[str]) -> Dict[str, List[float]]:
  """Device type of `device_types` -> (predicted - measured) / step ops of
  each of its one-device runs of at most `bounds.small_step_s` (other
  runs are not simulated)."""
  misses: Dict[str, List[float]] = {}
  simulators: Dict[int, Simulator] = {}  # One per graph (runs share them).
  for graph, ids, measured in one_device_runs:
    if measured > bounds.small_step_s:
      continue
    step_devices = set(ids[graph.step_mask].tolist())
    if len(step_devices) != 1:
      continue
    device_type = cluster.devices[step_devices.pop()].type
    if device_type not in device_types:
      continue
    if id(graph) not in simulators:
      simulators[id(graph)] = calibrated_simulator(graph, cluster,
                                                   calibration)
    predicted = simulators[id(graph)].simulate(ids).step_time_s
    misses.setdefault(device_type, []).append(
        (predicted - measured) / int(graph.step_mask.sum()))
  return misses


def calibrated_simulator(graph: OpGraph, cluster: Cluster,
                         calibration: Calibration,
                         costs: Optional[OpCosts] = None) -> Simulator:
  """The simulator of `graph` on `cluster` with `calibration` applied to the
  op costs and the cluster (rates, links, overheads).

  Args:
    graph: the op graph.
    cluster: the uncalibrated cluster.
    calibration: the calibration.
    costs: the calibrated op costs if already computed.
  """
  calibrated = apply_calibration(cluster, calibration)
  if costs is None:
    costs = CalibratedCostModel(calibration).op_costs(graph, calibrated)
  return Simulator(graph, calibrated, costs)
