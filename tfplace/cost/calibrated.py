"""The calibration of a cluster and the calibrated cost model.

`Calibration`: measured and fitted figures applied to the cluster's devices
and links (`apply_calibration`) and to the analytical model
(`CalibratedCostModel`); `tfplace.measurement.calibration_fit` fits one from
real runs. Its JSON file (format "tfplace.calibration/1"):

      {
        "format": "tfplace.calibration/1",
        "device_rates": {"CPU": {"matmul_flops": 6e10, "conv_flops": 3e10,
                                 "copy_bandwidth": 9e9, "conv_lanes": 16}},
        "op_types": {"CPU": {"MatMul": {"fixed_s": 3e-6, "scale": 1.4,
                                        "samples": 96},
                             "Conv2D": {"fixed_s": 2e-5, "scale": 1.0,
                                        "samples": 30,
                                        "curve_work_s": [1e-6, 1e-4, 1e-3],
                                        "curve_time_s": [2e-5, 2e-4,
                                                         1.1e-3],
                                        "strided": {"fixed_s": 2e-5,
                                                    "scale": 1.6,
                                                    "samples": 16,
                                                    "curve_work_s": [...],
                                                    "curve_time_s": [...]}},
                             "Einsum": {"fixed_s": 1e-5, "scale": 1.2,
                                        "samples": 36,
                                        "variants": {"batched": {
                                            "fixed_s": 1e-6, "scale": 3.0,
                                            "per_product_s": 5e-7,
                                            "samples": 36}}}}},
        "launch_overhead_s": {"CPU": 2e-7},
        "trace_excess_s": {"CPU": 1.2e-6},
        "launch_s": {"GPU": {"conv": 3e-5, "matmul": 8e-6,
                             "elementwise": 4e-6, "no_kernel": 1e-6, ...}},
        "dispatch_s": {"GPU": 2e-6}, "stall_s": {"GPU": 3e-4},
        "kernel_free": {"GPU": ["StridedSlice"]},
        "transfer_overhead_s": {"CPU": 4e-5},
        "transfer_byte_s": {"CPU": 2e-10},
        "links": {"loopback": {"latency_s": 6e-5, "bandwidth": 2e9}},
        "step_overhead_s": 3e-4,
        "run_overhead_s": {"/job:worker/replica:0/task:0/device:CPU:0": 1e-4,
                           "/job:worker/replica:0/task:1/device:CPU:0": 4e-4},
        "overlap_latency": true, "rendezvous_transfers": true,
        "compute_scale": {}, "op_type_scale": {},
        "notes": "calibration suite 'default' on local_servers"
      }

  Every key but "format" is optional. Per device type: `device_rates` sets
  the devices' measured rates (`Device.matmul_flops`, `conv_flops`,
  `copy_bandwidth`, `conv_lanes`), `launch_overhead_s` their per-op overhead,
  `trace_excess_s` what the profiler adds to each real op's traced time
  beyond the benchmark's tiny op (taken off every op's cost, not below the
  launch overhead), `transfer_overhead_s` their host cost per transfer,
  `transfer_byte_s` their host cost per byte transferred; `links` replaces
  latency and bandwidth of links (and the default link) of that kind;
  `step_overhead_s` sets the cluster's fixed step cost, `run_overhead_s`
  (per device name) the step cost of each device used (`Device.
  run_overhead_s`), and `overlap_latency` and `rendezvous_transfers` its
  transfer model, the one the calibration was fitted with (see
  `tfplace.cost.cluster.Cluster`; both false when absent).

  `op_types` holds, per device type and op type seen in calibration, the
  op's time beyond the launch overhead as `fixed_s + scale * roofline`
  (roofline: `AnalyticalCostModel.work_seconds` on the calibrated devices),
  or where a curve was measured (convolutions) as the curve: time against
  roofline at knots, interpolated in log-log (`OpTypeCost`); "strided", where
  present, is the same for the type's ops with a stride above 1, and
  "variants", where present, for its ops of each `Op.variant` ("batched"
  einsums, "channels_first" batch norms, "narrow_window" filter
  gradients, "transpose_b" matmuls); "per_product_s", where present, is
  added per matrix product an execution runs (`Op.matrix_products`: a
  batched matmul or einsum runs one per batch index).
  An op of a type not in it that runs a kernel costs as the fitted types
  typically do (`unseen_type_cost`: their median fixed part and scale on
  its roofline, a transcendental type's those of the transcendental
  types); other ops, and ops of a type or device type given a scale, keep
  the analytical time, times `compute_scale` of their device type and
  `op_type_scale` of their op type (the older, whole-graph form of a
  calibration).

  On a device type with `launch_s` (a GPU: the host launches its ops one
  after another and goes on while their kernels run), an op holds the
  device for the longer of its launch and its kernels: `launch_s` of its
  launch kind (`tfplace.cost.launch_kinds`, measured on untraced chains;
  an op type in `kernel_free` ran no kernel in calibration and is charged
  the "no_kernel" launch) and its kernel time, `op_types` there being fits
  of the traced kernel times (`OpRecord.kernel_s`), not of the traced
  launches, which the GPU tracer makes 2-10x longer. Every op there also
  costs `dispatch_s` (the executor's work per op of a real graph beyond a
  chain's), and a step that uses such a device waits its `stall_s` (added
  to the device's run overhead). No `trace_excess_s` applies there. Files
  written before a key existed
  load with it empty (or 0, or false): the old behaviour.
"""

import dataclasses
import json
from typing import Dict, Mapping, Optional, Tuple

from absl import logging
import numpy as np

from tfplace.cost.analytical import (TRANSCENDENTAL_OP_TYPES,
                                     TRIVIAL_OP_TYPES, AnalyticalConfig,
                                     AnalyticalCostModel)
from tfplace.cost.cluster import Cluster, LinkSpec
from tfplace.cost.launch_kinds import ELEMENTWISE, KINDS, NO_KERNEL, launch_kind
from tfplace.cost.op_costs import CostModel, OpCosts
from tfplace.errors import ClusterError
from tfplace.graph.op_graph import ControlFlowCost, OpGraph
from tfplace.io_utils import atomic_write, read_json

FORMAT = "tfplace.calibration/1"
# The measured device rates a calibration may set (`Device` fields; the
# convolution lanes too, measured with them).
DEVICE_RATES = ("matmul_flops", "conv_flops", "copy_bandwidth", "conv_lanes",
                "random_uniform_rate", "random_normal_rate")
# The `OpTypeCost.variants` key of the executions with a stride above 1 (no
# `Op.variant` has this name).
STRIDED = "strided"


@dataclasses.dataclass(frozen=True)
class OpTypeCost:
  """The fitted time of one op type on one device type, beyond the launch
  overhead: `fixed_s + scale * roofline seconds`, or, where a curve was
  measured, the curve; plus `per_product_s` per matrix product the
  execution runs (`Op.matrix_products`).

  Attributes:
    fixed_s: seconds per execution whatever the size (>= 0).
    scale: factor on the roofline time at the measured rates (> 0).
    samples: op executions it was fitted on.
    curve_work_s: roofline seconds of the curve's knots, increasing (empty:
      no curve).
    curve_time_s: the time at each knot, not decreasing. Between knots the
      time is interpolated in log-log; below the first knot it is the first
      knot's time (the op's fixed cost), above the last it grows in
      proportion to the roofline.
    variants: the costs of kinds of the type's executions that were
      measured apart from the plain ones: `STRIDED` for those with a stride
      above 1 (`Op.stride`: convolutions), and each `Op.variant` ("batched"
      einsums, "channels_first" batch norms, "narrow_window" filter
      gradients, "transpose_b" matmuls). A kind not in it costs as the
      plain executions. (The JSON form keeps the strided cost under its own
      key "strided", as files have since convolutions were fitted.)
    per_product_s: seconds per matrix product of an execution (>= 0; 0
      where none was fitted: the type runs one product, or none).
  """
  fixed_s: float
  scale: float
  samples: int = 0
  curve_work_s: Tuple[float, ...] = ()
  curve_time_s: Tuple[float, ...] = ()
  variants: Mapping[str, "OpTypeCost"] = dataclasses.field(
      default_factory=dict)
  per_product_s: float = 0.0

  def for_op(self, strided: bool, variant: str) -> "OpTypeCost":
    """The cost of the type's executions with a stride above 1 or of an
    `Op.variant`: their own where it was measured apart, else this one."""
    if strided and STRIDED in self.variants:
      return self.variants[STRIDED]
    return self.variants.get(variant, self)

  def __post_init__(self):
    _check_factors({"fixed_s": self.fixed_s,
                    "per_product_s": self.per_product_s}, "op_types",
                   allow_zero=True)
    _check_factors({"scale": self.scale}, "op_types", allow_zero=False)
    if int(self.samples) != self.samples or self.samples < 0:
      raise ClusterError(f"calibration op_types samples must be a whole "
                         f"number >= 0, got {self.samples!r}")
    work, time = self.curve_work_s, self.curve_time_s
    if len(work) != len(time) or len(work) == 1:
      raise ClusterError(f"calibration op_types curve needs as many times "
                         f"as work knots, at least 2, got {len(work)} and "
                         f"{len(time)}")
    _check_factors({str(i): v for i, v in enumerate(work + time)},
                   "op_types curve", allow_zero=False)
    if any(b <= a for a, b in zip(work, work[1:])) or any(
        b < a for a, b in zip(time, time[1:])):
      raise ClusterError("calibration op_types curve: the work knots must "
                         "increase and the times must not decrease")

  def seconds(self, roofline_s: np.ndarray,
              matrix_products: np.ndarray = 1.0) -> np.ndarray:
    """The op's time beyond the launch overhead for roofline seconds
    `roofline_s` and `matrix_products` products per execution."""
    roofline_s = np.asarray(roofline_s, np.float64)
    products = self.per_product_s * np.asarray(matrix_products, np.float64)
    if not self.curve_work_s:
      return products + self.fixed_s + self.scale * roofline_s
    log_work = np.log(self.curve_work_s)
    log_time = np.log(self.curve_time_s)
    x = np.log(np.maximum(roofline_s, 1e-300))
    inside = np.exp(np.interp(x, log_work, log_time))
    beyond = roofline_s * (self.curve_time_s[-1] / self.curve_work_s[-1])
    return products + np.where(x > log_work[-1], beyond, inside)


# A calibration whose cluster benchmarks differ by more than this (any
# figure, any two of them) was measured on a machine that changed meanwhile.
STEADY_LIMIT = 1.25


@dataclasses.dataclass(frozen=True)
class Calibration:
  """Measured and fitted figures of a cluster (see the module docstring).

  Attributes:
    compute_scale: device type -> factor on the analytical time of ops not
      in `op_types`.
    op_type_scale: op type -> factor on the analytical time of ops not in
      `op_types`.
    launch_overhead_s: device type -> per-op overhead (seconds).
    links: link kind -> latency and bandwidth.
    notes: free text (what it was fitted on).
    transfer_overhead_s: device type -> host seconds per transfer.
    step_overhead_s: fixed seconds per step.
    overlap_latency: the cluster's link model.
    rendezvous_transfers: whether devices do message work only when idle
      (`Cluster.rendezvous_transfers`).
    device_rates: device type -> measured rate name (`DEVICE_RATES`) ->
      value.
    op_types: device type -> op type -> `OpTypeCost`.
    run_overhead_s: device name -> step cost when the device is used.
    transfer_byte_s: device type -> host seconds per byte transferred.
    recv_issue_s: device type -> host seconds to start one Recv
      (`Device.recv_issue_s`; measured on a profiled step).
    trace_excess_s: device type -> seconds a traced op's duration overstates
      its time in an untraced step, beyond what the tiny op of the
      benchmark shows (`calibration_fit.fit_trace_excess`): taken off every
      op's cost on that device type, not below the launch overhead.
    launch_s: device type -> launch kind -> untraced launch seconds per op
      (`DeviceBenchmark.launch_s`); such device types are launch-bound
      (see the module docstring).
    dispatch_s: launch-bound device type -> seconds added to each op there
      (`calibration_fit.fit_dispatch`).
    stall_s: launch-bound device type -> seconds a step waits on such a
      device it uses (`calibration_fit.fit_stall`), added to its run
      overhead.
    kernel_free: device type -> op types whose traced executions there ran
      no kernel.
    loop_op_types: device type -> op type -> `OpTypeCost` fitted on the
      executions of While loop bodies alone (`loop_samples`): a body op's
      cost where its type has one (`CalibratedCostModel.body_seconds`).
    benchmark_spread: how far the cluster benchmarks taken while it was
      calibrated differ, per figure ("compute", "per_op", "message",
      "empty_step": the widest ratio between two, >= 1;
      `measurement.machine_drift.benchmark_spread`); empty: not known.
      A wide spread means the machine changed while it was measured.
  """
  compute_scale: Mapping[str, float] = dataclasses.field(default_factory=dict)
  op_type_scale: Mapping[str, float] = dataclasses.field(default_factory=dict)
  launch_overhead_s: Mapping[str, float] = dataclasses.field(
      default_factory=dict)
  links: Mapping[str, LinkSpec] = dataclasses.field(default_factory=dict)
  notes: str = ""
  transfer_overhead_s: Mapping[str, float] = dataclasses.field(
      default_factory=dict)
  step_overhead_s: float = 0.0
  overlap_latency: bool = False
  device_rates: Mapping[str, Mapping[str, float]] = dataclasses.field(
      default_factory=dict)
  op_types: Mapping[str, Mapping[str, OpTypeCost]] = dataclasses.field(
      default_factory=dict)
  run_overhead_s: Mapping[str, float] = dataclasses.field(
      default_factory=dict)
  transfer_byte_s: Mapping[str, float] = dataclasses.field(
      default_factory=dict)
  rendezvous_transfers: bool = False
  trace_excess_s: Mapping[str, float] = dataclasses.field(
      default_factory=dict)
  recv_issue_s: Mapping[str, float] = dataclasses.field(
      default_factory=dict)
  launch_s: Mapping[str, Mapping[str, float]] = dataclasses.field(
      default_factory=dict)
  dispatch_s: Mapping[str, float] = dataclasses.field(default_factory=dict)
  stall_s: Mapping[str, float] = dataclasses.field(default_factory=dict)
  kernel_free: Mapping[str, Tuple[str, ...]] = dataclasses.field(
      default_factory=dict)
  benchmark_spread: Mapping[str, float] = dataclasses.field(
      default_factory=dict)
  loop_op_types: Mapping[str, Mapping[str, OpTypeCost]] = dataclasses.field(
      default_factory=dict)

  def __post_init__(self):
    _check_factors(self.transfer_overhead_s, "transfer_overhead_s",
                   allow_zero=True)
    _check_factors(self.trace_excess_s, "trace_excess_s", allow_zero=True)
    _check_factors(self.recv_issue_s, "recv_issue_s", allow_zero=True)
    _check_factors(self.dispatch_s, "dispatch_s", allow_zero=True)
    _check_factors(self.stall_s, "stall_s", allow_zero=True)
    _check_factors(self.transfer_byte_s, "transfer_byte_s", allow_zero=True)
    _check_factors(self.benchmark_spread, "benchmark_spread",
                   allow_zero=False)
    _check_factors(self.run_overhead_s, "run_overhead_s", allow_zero=True)
    _check_factors({"": self.step_overhead_s}, "step_overhead_s",
                   allow_zero=True)
    for name in ("overlap_latency", "rendezvous_transfers"):
      if not isinstance(getattr(self, name), bool):
        raise ClusterError(f"calibration {name} must be true or false, "
                           f"got {getattr(self, name)!r}")
    for dtype, launch in self.launch_s.items():
      _check_known(launch, f"launch_s[{dtype!r}]", "launch kinds", KINDS)
      if ELEMENTWISE not in launch:
        raise ClusterError(f"calibration launch_s[{dtype!r}] needs the "
                           f"{ELEMENTWISE!r} kind (the other kinds' ops "
                           f"fall back to it)")
      _check_factors(launch, f"launch_s[{dtype!r}]", allow_zero=True)
    for dtype, rates in self.device_rates.items():
      _check_known(rates, f"device_rates[{dtype!r}]", "keys", DEVICE_RATES)
      _check_factors(rates, f"device_rates[{dtype!r}]", allow_zero=False)

  def unsteady_warning(self, path: str) -> str:
    """A warning about the file at `path` when its benchmarks were more
    than `STEADY_LIMIT` apart, else ""."""
    spread = self.benchmark_spread
    if not spread or max(spread.values()) <= STEADY_LIMIT:
      return ""
    names = {"per_op": "per op", "message": "per message"}
    figures = ", ".join(f"{names.get(k, k.replace('_', ' '))} x{v:.2f}"
                        for k, v in spread.items())
    return (f"{path} was measured on a machine that was not steady (its "
            f"cluster benchmarks differ by up to {figures}): predictions made "
            "with it can be off by as much for that reason alone; "
            "calibrate again when the machine is quieter")

  def seen(self, device_type: str, op_type: str) -> bool:
    """True if ops of `op_type` on `device_type` have fitted costs."""
    return op_type in self.op_types.get(device_type, {})

  def to_dict(self) -> dict:
    spread = ({"benchmark_spread": dict(self.benchmark_spread)}
              if self.benchmark_spread else {})
    if self.loop_op_types:
      spread["loop_op_types"] = _op_types_dict(self.loop_op_types)
    return {"format": FORMAT, "compute_scale": dict(self.compute_scale),
            "op_type_scale": dict(self.op_type_scale),
            "launch_overhead_s": dict(self.launch_overhead_s),
            "trace_excess_s": dict(self.trace_excess_s),
            "recv_issue_s": dict(self.recv_issue_s),
            "launch_s": {t: dict(v) for t, v in self.launch_s.items()},
            "dispatch_s": dict(self.dispatch_s),
            "stall_s": dict(self.stall_s),
            "kernel_free": {t: list(v) for t, v in self.kernel_free.items()},
            "links": {k: {"latency_s": v.latency_s, "bandwidth": v.bandwidth}
                      for k, v in self.links.items()},
            "transfer_overhead_s": dict(self.transfer_overhead_s),
            "transfer_byte_s": dict(self.transfer_byte_s),
            "step_overhead_s": self.step_overhead_s,
            "run_overhead_s": dict(self.run_overhead_s),
            "overlap_latency": self.overlap_latency,
            "rendezvous_transfers": self.rendezvous_transfers,
            "device_rates": {t: dict(r) for t, r in self.device_rates.items()},
            "op_types": _op_types_dict(self.op_types),
            **spread, "notes": self.notes}

  def save(self, path: str) -> None:
    """Writes the JSON form atomically."""
    atomic_write(path, json.dumps(self.to_dict(), indent=2))

  @classmethod
  def from_dict(cls, data: dict) -> "Calibration":
    """Parses the JSON form; raises ClusterError if malformed."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
      raise ClusterError(f"a calibration must be a JSON object with "
                         f"\"format\": \"{FORMAT}\"")
    try:
      links = {k: LinkSpec(float(v["latency_s"]), float(v["bandwidth"]), k)
               for k, v in data.get("links", {}).items()}
      return cls(compute_scale=_factors(data, "compute_scale"),
                 op_type_scale=_factors(data, "op_type_scale"),
                 launch_overhead_s=_factors(data, "launch_overhead_s",
                                            allow_zero=True),
                 trace_excess_s=_factors(data, "trace_excess_s",
                                         allow_zero=True),
                 recv_issue_s=_factors(data, "recv_issue_s",
                                       allow_zero=True),
                 launch_s={str(t): {str(k): float(v) for k, v in
                                    launch.items()}
                           for t, launch in data.get("launch_s",
                                                     {}).items()},
                 dispatch_s=_factors(data, "dispatch_s", allow_zero=True),
                 stall_s=_factors(data, "stall_s", allow_zero=True),
                 kernel_free={str(t): tuple(str(x) for x in types)
                              for t, types in data.get("kernel_free",
                                                       {}).items()},
                 links=links, notes=str(data.get("notes", "")),
                 transfer_overhead_s=_factors(data, "transfer_overhead_s",
                                              allow_zero=True),
                 transfer_byte_s=_factors(data, "transfer_byte_s",
                                          allow_zero=True),
                 step_overhead_s=float(data.get("step_overhead_s", 0.0)),
                 run_overhead_s=_factors(data, "run_overhead_s",
                                         allow_zero=True),
                 overlap_latency=data.get("overlap_latency", False),
                 rendezvous_transfers=data.get("rendezvous_transfers", False),
                 device_rates={str(t): {str(k): float(v)
                                        for k, v in rates.items()}
                               for t, rates in data.get("device_rates",
                                                        {}).items()},
                 op_types=_op_types(data.get("op_types", {})),
                 loop_op_types=_op_types(data.get("loop_op_types", {})),
                 benchmark_spread=_factors(data, "benchmark_spread"))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
      raise ClusterError(f"malformed calibration: {e!r}") from None

  @classmethod
  def load(cls, path: str) -> "Calibration":
    """Reads the JSON form; logs `unsteady_warning` when it has one."""
    data = read_json(path, "calibration", ClusterError)
    try:
      calibration = cls.from_dict(data)
    except ClusterError as e:  # Which file (a cluster JSON given instead?).
      raise ClusterError(f"{path}: {e}") from None
    warning = calibration.unsteady_warning(path)
    if warning:
      logging.warning("%s", warning)
    return calibration


def _op_types_dict(op_types: Mapping[str, Mapping[str, OpTypeCost]]
                   ) -> dict:
  return {t: {k: _op_type_dict(v) for k, v in sorted(per_type.items())}
          for t, per_type in op_types.items()}


def _op_type_dict(cost: OpTypeCost) -> dict:
  """The JSON form of an op type's cost (curve keys only with a curve,
  "strided" and "variants" only with such costs)."""
  out = {"fixed_s": cost.fixed_s, "scale": cost.scale,
         "samples": cost.samples}
  if cost.per_product_s:
    out["per_product_s"] = cost.per_product_s
  if cost.curve_work_s:
    out.update(curve_work_s=list(cost.curve_work_s),
               curve_time_s=list(cost.curve_time_s))
  variants = dict(cost.variants)
  if STRIDED in variants:
    out[STRIDED] = _op_type_dict(variants.pop(STRIDED))
  if variants:
    out["variants"] = {k: _op_type_dict(v) for k, v in variants.items()}
  return out


def _op_type_cost(v: dict) -> OpTypeCost:
  variants = {str(k): _op_type_cost(c)
              for k, c in v.get("variants", {}).items()}
  if v.get(STRIDED) is not None:
    variants[STRIDED] = _op_type_cost(v[STRIDED])
  return OpTypeCost(
      float(v["fixed_s"]), float(v["scale"]), int(v.get("samples", 0)),
      tuple(float(x) for x in v.get("curve_work_s", ())),
      tuple(float(x) for x in v.get("curve_time_s", ())), variants,
      float(v.get("per_product_s", 0.0)))


def _op_types(data: dict) -> Dict[str, Dict[str, OpTypeCost]]:
  return {str(dtype): {str(t): _op_type_cost(v) for t, v in per_type.items()}
          for dtype, per_type in data.items()}


def _factors(data: dict, key: str, allow_zero: bool = False) -> dict:
  out = {str(k): float(v) for k, v in data.get(key, {}).items()}
  _check_factors(out, key, allow_zero)
  return out


def _check_known(values: Mapping[str, float], key: str, what: str,
                 allowed) -> None:
  """Raises ClusterError if `values` has a key outside `allowed`."""
  unknown = set(values) - set(allowed)
  if unknown:
    raise ClusterError(f"calibration {key} has unknown {what} "
                       f"{sorted(unknown)}; allowed: {list(allowed)}")


def _check_factors(values: Mapping[str, float], key: str,
                   allow_zero: bool) -> None:
  for k, v in values.items():
    try:
      v = float(v)
    except (TypeError, ValueError):
      raise ClusterError(f"calibration {key}[{k!r}] must be a number, "
                         f"got {v!r}") from None
    if not np.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
      raise ClusterError(f"calibration {key}[{k!r}] must be a "
                         f"{'non-negative' if allow_zero else 'positive'} "
                         f"finite number, got {v}")


def apply_calibration(cluster: Cluster, calibration: Calibration) -> Cluster:
  """The cluster with the calibration's step overhead and link model, and
  its links, measured rates, launch and transfer overheads where the
  calibration has figures for their kind or device type."""
  devices = tuple(_calibrated_device(d, calibration) for d in cluster.devices)
  links = tuple(
      dataclasses.replace(l, latency_s=calibration.links[l.kind].latency_s,
                          bandwidth=calibration.links[l.kind].bandwidth)
      if l.kind in calibration.links else l for l in cluster.links)
  default = cluster.default_link
  if default.kind in calibration.links:
    spec = calibration.links[default.kind]
    default = LinkSpec(spec.latency_s, spec.bandwidth, default.kind)
  return dataclasses.replace(cluster, devices=devices, links=links,
                             default_link=default,
                             step_overhead_s=calibration.step_overhead_s,
                             overlap_latency=calibration.overlap_latency,
                             rendezvous_transfers=(
                                 calibration.rendezvous_transfers))


def _calibrated_device(device, calibration: Calibration):
  changes = dict(calibration.device_rates.get(device.type, {}))
  if device.type in calibration.launch_overhead_s:
    changes["launch_overhead_s"] = calibration.launch_overhead_s[device.type]
  if device.type in calibration.transfer_overhead_s:
    changes["transfer_overhead_s"] = calibration.transfer_overhead_s[
        device.type]
  if device.type in calibration.transfer_byte_s:
    changes["transfer_byte_s"] = calibration.transfer_byte_s[device.type]
  if device.type in calibration.recv_issue_s:
    changes["recv_issue_s"] = calibration.recv_issue_s[device.type]
  if device.name in calibration.run_overhead_s:
    changes["run_overhead_s"] = calibration.run_overhead_s[device.name]
  if device.type in calibration.stall_s:
    changes["run_overhead_s"] = changes.get(
        "run_overhead_s", device.run_overhead_s) + calibration.stall_s[
            device.type]
  return dataclasses.replace(device, **changes) if changes else device


class CalibratedCostModel(CostModel):
  """The analytical model with a Calibration's per-op-type costs applied.

  An op of a type the calibration has seen on the device's type costs
  `launch_overhead_s + OpTypeCost.seconds(roofline)`, a top-level op of
  another type that runs a kernel the same with `unseen_type_cost` (unless
  a scale is given for its type or device type); any other op its
  analytical time times `compute_scale` and `op_type_scale`; then every op
  less the device type's `trace_excess_s`, not below the launch overhead
  (an op already cheaper keeps its cost). A control-flow op (While/If/Case)
  whose bodies run seen types costs its launch plus each body op's
  executions times the same (`body_seconds`: fitted less the excess where
  seen, analytical where not). On a launch-bound device type
  (`Calibration.launch_s`) an op costs the longer of its kind's launch and
  its kernel time (the fit of its type, else its roofline; none for a
  kernel-free op); an op that launches control-flow bodies keeps its
  analytical time. Apply
  `apply_calibration` to the cluster too, so the measured rates, links and
  overheads are used as well.
  """

  name = "calibrated"

  def __init__(self, calibration: Calibration,
               config: Optional[AnalyticalConfig] = None):
    self.calibration = calibration
    self.base = AnalyticalCostModel(config or AnalyticalConfig())

  def estimate(self, graph: OpGraph, cluster: Cluster) -> OpCosts:
    base = self.base.estimate(graph, cluster)
    cal = self.calibration
    col = np.array([cal.compute_scale.get(d.type, 1.0) for d in cluster.devices])
    row = np.array([cal.op_type_scale.get(t, 1.0) for t in graph.op_types])
    seconds = base.compute_s * row[:, None] * col[None, :]
    if cal.op_types or cal.launch_s:
      self._fitted_op_types(graph, cluster, seconds)
    for j, device in enumerate(cluster.devices):
      if device.type in cal.launch_s:
        continue
      excess = cal.trace_excess_s.get(device.type, 0.0)
      if excess > 0:
        col = seconds[:, j]
        floor = np.minimum(col, device.launch_overhead_s)
        seconds[:, j] = np.where(np.isfinite(col),
                                 np.maximum(floor, col - excess), col)
    return dataclasses.replace(base, compute_s=seconds)

  def _fitted_op_types(self, graph: OpGraph, cluster: Cluster,
                       seconds: np.ndarray) -> None:
    """Overwrites, in place, the cost of ops whose type has a fit."""
    work = self.base.work_seconds(graph, cluster)
    rows_of: Dict[Tuple[str, bool, str], list] = {}
    for i, op in enumerate(graph.ops):
      rows_of.setdefault((op.type, op.stride > 1, op.variant), []).append(i)
    cal = self.calibration
    for j, device in enumerate(cluster.devices):
      fits = cal.op_types.get(device.type, {})
      launch = cal.launch_s.get(device.type)
      stand_in = not (launch or device.type in cal.compute_scale)
      for (op_type, strided, variant), rows in rows_of.items():
        fit = fits.get(op_type)
        if fit is not None:
          fit = fit.for_op(strided, variant)
        elif (stand_in and op_type not in TRIVIAL_OP_TYPES
              and op_type not in cal.op_type_scale):
          rows = [i for i in rows if graph.ops[i].body is None
                  and np.isfinite(seconds[i, j])]
          fit = unseen_type_cost(fits, op_type)
        if launch:
          self._launch_bound(graph, op_type, fit, launch, rows, j, work,
                             seconds, self.calibration.kernel_free.get(
                                 device.type, ()),
                             self.calibration.dispatch_s.get(device.type,
                                                             0.0))
        elif fit is not None:
          seconds[rows, j] = device.launch_overhead_s + fit.seconds(
              work[rows, j], _matrix_products(graph, rows))
      if not launch:
        self._fitted_bodies(graph, cluster, j, fits, seconds)

  def _fitted_bodies(self, graph: OpGraph, cluster: Cluster, j: int,
                     fits: Mapping[str, OpTypeCost],
                     seconds: np.ndarray) -> None:
    """Sets, in place, the cost on device `j` of each control-flow op
    whose bodies run op types with fits: its launch plus each body op's
    executions times its cost (`body_seconds`)."""
    in_loops = self.calibration.loop_op_types.get(
        cluster.devices[j].type, {})
    for i, op in enumerate(graph.ops):
      body = op.body
      if (body is None or not body.ops or not np.isfinite(seconds[i, j])
          or not any(r.type in fits or r.type in in_loops
                     for r in body.ops)):
        continue
      executions = np.array([r.executions for r in body.ops])
      seconds[i, j] = cluster.devices[j].launch_overhead_s + float(
          executions @ self.body_seconds(body, cluster, j))

  def body_seconds(self, body: ControlFlowCost, cluster: Cluster,
                   j: int) -> np.ndarray:
    """float64 [R]: one run of each of a control-flow op's body ops on
    device `j`: its type's fit on loop bodies where the calibration has
    one (`Calibration.loop_op_types`), else its fit as a top-level op,
    less the device type's trace excess, not below the launch overhead;
    its analytical time where neither."""
    device = cluster.devices[j]
    fits = dict(self.calibration.op_types.get(device.type, {}))
    fits.update(self.calibration.loop_op_types.get(device.type, {}))
    excess = self.calibration.trace_excess_s.get(device.type, 0.0)
    types = [r.type for r in body.ops]
    flops = np.array([r.flops for r in body.ops], np.float64)
    moved = np.array([r.bytes_moved for r in body.ops], np.float64)
    one = dataclasses.replace(cluster, devices=(device,))
    work = self.base.body_work_seconds(body, one)[:, 0]
    plain = self.base._seconds(types, flops, moved, one)[:, 0]
    launch = device.launch_overhead_s
    return np.array([
        max(launch, launch + float(fits[t].seconds(np.array([w]))[0])
            - excess) if t in fits else p
        for t, w, p in zip(types, work, plain)])

  @staticmethod
  def _launch_bound(graph: OpGraph, op_type: str,
                    fit: Optional[OpTypeCost], launch: Mapping[str, float],
                    rows: list, j: int, work: np.ndarray,
                    seconds: np.ndarray, kernel_free: Tuple[str, ...],
                    dispatch_s: float) -> None:
    """Sets, in place, the cost on launch-bound device `j` of the ops
    `rows` of one type: the longer of its kind's launch and its kernel,
    plus the executor's `dispatch_s`."""
    rows = [i for i in rows if graph.ops[i].body is None
            and np.isfinite(seconds[i, j])]
    if not rows:
      return
    kind = launch_kind(op_type, kernel_free)
    if kind == NO_KERNEL:
      kernel = np.zeros(len(rows))
    elif fit is None:
      kernel = work[rows, j]
    else:
      kernel = fit.seconds(work[rows, j], _matrix_products(graph, rows))
    seconds[rows, j] = dispatch_s + np.maximum(
        launch.get(kind, launch[ELEMENTWISE]), kernel)


def unseen_type_cost(fits: Mapping[str, OpTypeCost], op_type: str = ""
                     ) -> Optional[OpTypeCost]:
  """The cost of an op of type `op_type`, which a calibration did not fit,
  on a device type whose types it fitted (`fits`): the median fixed part
  and the median scale of the fitted types that run a kernel (all but
  `TRIVIAL_OP_TYPES`), or, for a transcendental element-wise type
  (`TRANSCENDENTAL_OP_TYPES`), of the fitted transcendental ones where
  there are two or more; None where it fitted no kernel type.

  Every op pays its kernel's fixed work and runs at some efficiency; the
  bare roofline charges neither. On the judged graphs' one-device runs the
  types the suite never ran (UnsortedSegmentSum, Unique, Erfc,
  AssignSubVariableOp, TensorList ops...) took ~10x their roofline:
  keras_transformer's 0.19 ms a step, charged 0.02 ms, 0.09 ms so (its
  two Erfc 109 us traced: 15 us as a roofline, 21 us at the kernel types'
  medians, 59 us at the transcendental ones'; WORKSPACE_NOTES.md, issue
  13). The ops of a loop body keep their analytical time (`body_seconds`):
  costed so, keras_lstm's loops were over-predicted and it met the error
  target on 12 records of 29, not 21."""
  kernels = [f for t, f in fits.items() if t not in TRIVIAL_OP_TYPES]
  if not kernels:
    return None
  if op_type in TRANSCENDENTAL_OP_TYPES:
    kin = [f for t, f in fits.items() if t in TRANSCENDENTAL_OP_TYPES]
    kernels = kin if len(kin) >= 2 else kernels
  return OpTypeCost(float(np.median([f.fixed_s for f in kernels])),
                    float(np.median([f.scale for f in kernels])))


def _matrix_products(graph: OpGraph, rows: list) -> np.ndarray:
  """float64 [len(rows)]: each op's `Op.matrix_products`."""
  return np.array([graph.ops[i].matrix_products for i in rows], np.float64)


@dataclasses.dataclass(frozen=True)
class CalibrationCoverage:
  """How much of a prediction rests on costs the calibration did not fit.

  Attributes:
    uncalibrated_share: the share of the predicted op time (each step op on
      its device, summed) spent in ops whose type the calibration has not
      seen on that device type: stand-ins (`unseen_type_cost`) and
      analytical estimates, not fitted costs.
    op_seconds: the summed predicted op time.
    unseen: op type -> predicted seconds of those ops, largest first.
  """
  uncalibrated_share: float
  op_seconds: float
  unseen: Mapping[str, float]

  def describe(self, top: int = 5) -> str:
    """One line, e.g. "3.1 % of the predicted op time rests on op types not
    seen in calibration (Cumsum 2.0 %, ...)"."""
    if not self.unseen:
      return "every op type of the graph was seen in calibration"
    names = ", ".join(
        f"{t} {s / self.op_seconds * 100:.1f} %"
        for t, s in list(self.unseen.items())[:top])
    more = len(self.unseen) - top
    return (f"{self.uncalibrated_share * 100:.1f} % of the predicted op time "
            f"rests on op types not seen in calibration ({names}"
            f"{f', {more} more' if more > 0 else ''})")


def calibration_coverage(graph: OpGraph, cluster: Cluster,
                         calibration: Calibration, costs: OpCosts,
                         device_ids: Optional[np.ndarray] = None
                         ) -> CalibrationCoverage:
  """The share of predicted op time that rests on unseen op types.

  Args:
    graph: the op graph.
    cluster: the cluster of `costs` (device types are read from it).
    calibration: the calibration the costs came from.
    costs: the calibrated op costs ([M, D]; ops outside the step cost 0).
    device_ids: int [M], each op's device; None: each op on the device
      where it is cheapest.

  Returns:
    The coverage; share 0 for a graph with no op time.
  """
  compute = np.where(np.isfinite(costs.compute_s), costs.compute_s, np.inf)
  if device_ids is None:
    device_ids = np.argmin(compute, axis=1)
  device_ids = np.asarray(device_ids, dtype=np.int64)
  seconds = compute[np.arange(graph.num_ops), device_ids]
  seconds = np.where(np.isfinite(seconds), seconds, 0.0)
  unseen: Dict[str, float] = {}
  model = CalibratedCostModel(calibration)
  for i, op_type in enumerate(graph.op_types):
    j = int(device_ids[i])
    dtype = cluster.devices[j].type
    body = graph.ops[i].body
    if seconds[i] <= 0:
      continue
    if (body is not None and body.ops and dtype not in calibration.launch_s
        and any(calibration.seen(dtype, r.type) for r in body.ops)):
      # Its bodies' ops were costed one by one: each unseen one's share.
      runs = model.body_seconds(body, cluster, j) * np.array(
          [r.executions for r in body.ops])
      for row, t in zip(runs / max(runs.sum(), 1e-300), body.ops):
        if not calibration.seen(dtype, t.type):
          unseen[t.type] = unseen.get(t.type, 0.0) + float(seconds[i] * row)
    elif not calibration.seen(dtype, op_type):
      unseen[op_type] = unseen.get(op_type, 0.0) + float(seconds[i])
  total = float(seconds.sum())
  share = sum(unseen.values()) / total if total > 0 else 0.0
  return CalibrationCoverage(
      uncalibrated_share=share, op_seconds=total,
      unseen=dict(sorted(unseen.items(), key=lambda kv: -kv[1])))


def check_calibration_matches(calibration: Calibration,
                              cluster: Cluster) -> None:
  """Raises ClusterError if `calibration` was fitted on another cluster.

  A calibration names the devices whose run overhead it measured
  (`run_overhead_s`), the device types it fitted and the kind of link its
  workers talked over: another device list, none of the cluster's device
  types, or none of its link kinds (workers on one host measured, on
  several hosts applied: the same device names), means another cluster.
  """
  names = set(cluster.device_names)
  measured = set(calibration.run_overhead_s)
  if measured and measured != names:
    other = sorted(measured - names) or sorted(names - measured)
    raise ClusterError(
        f"the calibration was made for another cluster: it measured devices "
        f"{', '.join(sorted(measured))}; cluster {cluster.name!r} has "
        f"{', '.join(sorted(names))} (first difference: {other[0]}). "
        "Calibrate this cluster (tfplace calibrate --cluster ...)")
  fitted = (set(calibration.device_rates) | set(calibration.op_types)
            | set(calibration.launch_overhead_s))
  types = {d.type for d in cluster.devices}
  if fitted and not fitted & types:
    raise ClusterError(
        f"the calibration was made for another cluster: it fitted device "
        f"types {', '.join(sorted(fitted))}; cluster {cluster.name!r} has "
        f"{', '.join(sorted(types))}")
  kinds = {cluster.default_link.kind} | {l.kind for l in cluster.links}
  if calibration.links and not set(calibration.links) & kinds:
    raise ClusterError(
        f"the calibration was made for another cluster: its devices talked "
        f"over {', '.join(sorted(calibration.links))} links; cluster "
        f"{cluster.name!r} has {', '.join(sorted(kinds))} links (workers on "
        "one host and on several hosts are different clusters). Calibrate "
        "this cluster (tfplace calibrate --cluster ...)")
