"""Analytical op costs: a roofline estimate per op and device.

    time(op, device) = max(flops / (peak_flops / slots * efficiency),
                           bytes_moved / (memory_bandwidth / slots * mem_eff))
                       + launch_overhead_s

with bytes_moved = input bytes + output bytes. On a device with measured rates
(`Device.matmul_flops`, `conv_flops`, `copy_bandwidth`; see
`tfplace.measurement.cluster_benchmark`) those replace the efficiency-scaled
datasheet figures: convolutions (`CONV_OP_TYPES`) run at `conv_flops`, other
ops at `matmul_flops`, memory traffic at `copy_bandwidth`; a convolution whose
output has fewer channels (its innermost dimension, NHWC) than the device's
measured `conv_lanes` runs at channels / conv_lanes of `conv_flops` (its
kernel vectorizes along those channels: measured here, a 3x3 convolution
with 2, 4, 8 or 16 output channels takes the same time; from 16 on the time
grows with the channels). A random generator op
(`RANDOM_UNIFORM_OP_TYPES`, `RANDOM_NORMAL_OP_TYPES`) on a device with a
measured random rate (`Device.random_uniform_rate`, `random_normal_rate`:
values per second) takes at least its output's values / that rate: each
value costs a counter-based generator's rounds (a normal one a Box-Muller
transform too), tens of times a copy's time per element on a CPU. A
matrix op in float16 or bfloat16 (`TENSOR_CORE_OP_TYPES`, its first output's
dtype) on a device with tensor cores (`Device.half_flops`) runs
half_flops / peak_flops times faster than its float32 rate (measured or
datasheet); its bytes are already counted at two per element. An op that
copies data besides its own work (`Op.copy_bytes`: TF's einsum kernel puts
operands or its result into another order, `op_flops.einsum_transposes`; a
dense read or update of a variable in copy-on-read mode copies it whole,
`graph.variable_copies`) adds those bytes at the memory rate to its
roofline: the copies run before or after its work, not under it, and a
trivial op (a ReadVariableOp) costs them too. A device with `slots` = k
runs k ops at once and shares its peak among them, so each op gets 1/k of
it (total throughput stays the device's peak). The time is inf where
the device type has no kernel for the op. Trivial ops (NoOp, Const,
Identity, variable handles and reads, shape queries...) cost
`trivial_overhead_factor` times the launch overhead, and their copies.

A functional control-flow op (While/If/Case, `Op.body`) costs what its
bodies run: the same formula for each body op, times its executions (a
loop's trip count), summed, plus the op's own launch overhead. Its memory
(`OpCosts.output_bytes`) is its outputs plus one body iteration's working set
(`OpGraph.activation_bytes`). Kernels' scratch memory: `tfplace.cost.scratch`.
"""

import dataclasses
from typing import FrozenSet, Mapping, Optional, Sequence

import numpy as np

from tfplace.cost.cluster import Cluster
from tfplace.cost.op_costs import CostModel, OpCosts, kernel_mask
from tfplace.cost.scratch import scratch_bytes
from tfplace.graph.op_graph import ControlFlowCost, OpGraph

TRIVIAL_OP_TYPES = frozenset({
    "NoOp", "Const", "HostConst", "Identity", "IdentityN", "StopGradient",
    "PreventGradient", "Snapshot", "VarHandleOp", "VariableV2", "Variable",
    "ReadVariableOp", "VarIsInitializedOp", "Placeholder",
    "PlaceholderWithDefault", "Shape", "ShapeN", "Size", "Rank", "Reshape",
    "Squeeze", "ExpandDims", "_Arg", "_Retval", "Assert", "ControlTrigger",
    "Enter", "Exit", "NextIteration", "Merge", "Switch", "LoopCond",
    "BroadcastGradientArgs",
})

# Ops whose FLOPs run at a device's measured convolution rate.
CONV_OP_TYPES = frozenset({
    "Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "Conv3D",
    "Conv3DBackpropInputV2", "Conv3DBackpropFilterV2", "_FusedConv2D",
    "DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput",
    "DepthwiseConv2dNativeBackpropFilter",
})
# Matrix ops that run on tensor cores in float16 / bfloat16.
TENSOR_CORE_OP_TYPES = frozenset({
    "MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Einsum",
    "_FusedMatMul", "Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter",
    "Conv3D", "Conv3DBackpropInputV2", "Conv3DBackpropFilterV2",
    "_FusedConv2D",
})
HALF_DTYPES = frozenset({"float16", "bfloat16"})
# Random generators, by the distribution their cost per value follows.
RANDOM_UNIFORM_OP_TYPES = frozenset({
    "RandomUniform", "RandomUniformInt", "StatelessRandomUniform",
    "StatelessRandomUniformV2", "StatelessRandomUniformInt",
    "StatelessRandomUniformIntV2", "StatelessRandomUniformFullInt",
    "StatelessRandomUniformFullIntV2",
})
RANDOM_NORMAL_OP_TYPES = frozenset({
    "RandomStandardNormal", "StatelessRandomNormal",
    "StatelessRandomNormalV2", "TruncatedNormal", "StatelessTruncatedNormal",
    "StatelessTruncatedNormalV2", "ParameterizedTruncatedNormal",
})
# Element-wise ops that evaluate a transcendental function per element (a
# polynomial or rational approximation: several times an add's work; on
# one core here Exp, Erfc, Tanh, Sigmoid took 0.24-0.62 ns an element in
# cache, an add 0.02).
TRANSCENDENTAL_OP_TYPES = frozenset({
    "Exp", "Expm1", "Log", "Log1p", "Tanh", "Sigmoid", "Erf", "Erfc",
    "Erfinv", "Softplus", "Elu", "Selu", "Pow", "Sin", "Cos", "Tan", "Asin",
    "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Lgamma",
    "Digamma",
})
# Convolutions whose kernels vectorize along their output's channels, so
# that fewer than `Device.conv_lanes` of them leave vector lanes idle.
NARROW_CHANNEL_OP_TYPES = frozenset({
    "Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "_FusedConv2D",
})


@dataclasses.dataclass(frozen=True)
class AnalyticalConfig:
  """Efficiencies of the roofline model.

  Attributes:
    compute_efficiency: fraction of peak FLOP/s reached, per device type.
    default_compute_efficiency: for device types not listed.
    memory_efficiency: fraction of memory bandwidth reached.
    op_type_scale: optional multipliers on the time of given op types.
    trivial_op_types: ops that cost only (a fraction of) the launch overhead.
    trivial_overhead_factor: that fraction.
  """
  compute_efficiency: Mapping[str, float] = dataclasses.field(
      default_factory=lambda: {"GPU": 0.6, "CPU": 0.4})
  default_compute_efficiency: float = 0.5
  memory_efficiency: float = 0.7
  op_type_scale: Mapping[str, float] = dataclasses.field(default_factory=dict)
  trivial_op_types: FrozenSet[str] = TRIVIAL_OP_TYPES
  trivial_overhead_factor: float = 1.0


class AnalyticalCostModel(CostModel):
  """Roofline op costs from FLOPs, bytes and the device datasheet figures."""

  name = "analytical"

  def __init__(self, config: AnalyticalConfig = AnalyticalConfig()):
    self.config = config

  def estimate(self, graph: OpGraph, cluster: Cluster) -> OpCosts:
    """Returns compute seconds [M, D], parameter and output bytes [M]."""
    moved = (graph.input_bytes + graph.output_bytes).astype(np.float64)
    flops = graph.flops.copy()
    bodies = [i for i, op in enumerate(graph.ops) if op.body is not None]
    flops[bodies] = 0.0  # The op itself only launches its bodies.
    moved[bodies] = 0.0
    seconds = self._seconds(graph.op_types, flops, moved, cluster,
                            _output_channels(graph, cluster),
                            _random_values(graph, cluster),
                            _half_precision(graph, cluster),
                            graph.copy_bytes)
    for i in bodies:
      seconds[i] += self._body_seconds(graph.ops[i].body, cluster)
    seconds[~kernel_mask(graph, cluster)] = np.inf
    return OpCosts(compute_s=seconds, param_bytes=graph.resident_bytes.copy(),
                   output_bytes=graph.activation_bytes.copy(),
                   scratch_bytes=scratch_bytes(graph, cluster))

  def work_seconds(self, graph: OpGraph, cluster: Cluster) -> np.ndarray:
    """float64 [M, D]: the roofline part of each op's time, without its own
    launch overhead (for trivial ops only their copies; a control-flow op's
    bodies in full).
    """
    moved = (graph.input_bytes + graph.output_bytes).astype(np.float64)
    flops = graph.flops.copy()
    bodies = [i for i, op in enumerate(graph.ops) if op.body is not None]
    flops[bodies] = 0.0
    moved[bodies] = 0.0
    work = self._work(graph.op_types, flops, moved, cluster,
                      _output_channels(graph, cluster),
                      _random_values(graph, cluster),
                      _half_precision(graph, cluster),
                      graph.copy_bytes)
    for i in bodies:
      work[i] += self._body_seconds(graph.ops[i].body, cluster)
    return work

  def _seconds(self, op_types: Sequence[str], flops: np.ndarray,
               moved: np.ndarray, cluster: Cluster,
               channels: Optional[np.ndarray] = None,
               random_values: Optional[np.ndarray] = None,
               half: Optional[np.ndarray] = None,
               copies: Optional[np.ndarray] = None) -> np.ndarray:
    """Roofline seconds [N, D] of one execution of N ops on every device
    (`channels`, `random_values`, `half`, `copies`: see `_work`)."""
    cfg = self.config
    overhead = np.array([d.launch_overhead_s for d in cluster.devices])
    trivial = np.array([t in cfg.trivial_op_types for t in op_types],
                       dtype=bool)
    over = np.where(trivial[:, None], cfg.trivial_overhead_factor, 1.0)
    return (self._work(op_types, flops, moved, cluster, channels,
                       random_values, half, copies)
            + over * overhead[None, :])

  def _work(self, op_types: Sequence[str], flops: np.ndarray,
            moved: np.ndarray, cluster: Cluster,
            channels: Optional[np.ndarray] = None,
            random_values: Optional[np.ndarray] = None,
            half: Optional[np.ndarray] = None,
            copies: Optional[np.ndarray] = None) -> np.ndarray:
    """Seconds [N, D] of the roofline work alone (for trivial ops only
    their copies).
    `channels`: each op's output channels ([N], 0: unknown), None when no
    device has `conv_lanes`; `random_values`: each random generator's
    output values ([N], 0 for other ops), None when no device has a
    measured random rate; `half`: bool [N], the ops that run on tensor
    cores, None when no device has `half_flops`; `copies`: each op's
    `Op.copy_bytes` ([N]), memory traffic added to its roofline (the
    copies run before or after its own work), None for none."""
    cfg = self.config
    flop_rate, conv_rate, bandwidth = self._rates(cluster)
    conv = np.array([t in CONV_OP_TYPES for t in op_types], dtype=bool)
    rate = np.where(conv[:, None], conv_rate[None, :], flop_rate[None, :])
    if half is not None:
      boost = np.array([max(1.0, d.half_flops / d.peak_flops)
                        for d in cluster.devices])
      rate = np.where(half[:, None], rate * boost[None, :], rate)
    flop_seconds = flops[:, None] / rate
    if channels is not None:
      narrow = np.array([t in NARROW_CHANNEL_OP_TYPES for t in op_types],
                        dtype=bool) & (channels > 0)
      lanes = np.array([d.conv_lanes for d in cluster.devices])
      flop_seconds[narrow] *= np.maximum(
          1.0, lanes[None, :] / channels[narrow, None])
    compute = np.maximum(flop_seconds, moved[:, None] / bandwidth[None, :])
    if random_values is not None:
      compute = np.maximum(compute, _random_seconds(op_types, random_values,
                                                    cluster))
    trivial = np.array([t in cfg.trivial_op_types for t in op_types],
                       dtype=bool)
    compute[trivial] = 0.0
    if copies is not None:
      compute = compute + copies[:, None] / bandwidth[None, :]
    scale = np.array([cfg.op_type_scale.get(t, 1.0) for t in op_types])
    return compute * scale[:, None]

  def _rates(self, cluster: Cluster):
    """Per device: (FLOP/s, convolution FLOP/s, bytes/s) one op gets."""
    cfg = self.config
    devices = cluster.devices
    eff = np.array([cfg.compute_efficiency.get(d.type,
                                               cfg.default_compute_efficiency)
                    for d in devices])
    slots = np.array([d.slots for d in devices], dtype=np.float64)
    peak = np.array([d.peak_flops for d in devices]) * eff
    matmul = np.array([d.matmul_flops for d in devices])
    conv = np.array([d.conv_flops for d in devices])
    flop_rate = np.where(matmul > 0, matmul, peak)
    conv_rate = np.where(conv > 0, conv, flop_rate)
    copy = np.array([d.copy_bandwidth for d in devices])
    bandwidth = np.where(
        copy > 0, copy,
        np.array([d.memory_bandwidth for d in devices]) * cfg.memory_efficiency)
    return flop_rate / slots, conv_rate / slots, bandwidth / slots

  def body_work_seconds(self, body: ControlFlowCost,
                        cluster: Cluster) -> np.ndarray:
    """float64 [R, D]: the roofline part of one execution of each of a
    control-flow op's body rows (0 for trivial ops; a loop frame's rows
    move nothing)."""
    rows = body.ops
    return self._work([r.type for r in rows],
                      np.array([r.flops for r in rows], np.float64),
                      np.array([r.bytes_moved for r in rows], np.float64),
                      cluster)

  def _body_seconds(self, body: ControlFlowCost,
                    cluster: Cluster) -> np.ndarray:
    """Seconds [D] of everything a control-flow op's bodies run."""
    if not body.ops:
      return np.zeros(cluster.num_devices)
    rows = body.ops
    per_run = self._seconds(
        [r.type for r in rows], np.array([r.flops for r in rows]),
        np.array([r.bytes_moved for r in rows], dtype=np.float64), cluster)
    executions = np.array([r.executions for r in rows])
    return executions @ per_run


def _output_channels(graph: OpGraph, cluster: Cluster
                     ) -> Optional[np.ndarray]:
  """Each op's output channels (the innermost dimension of its first
  output; 0 without one), or None when no device of `cluster` has a
  measured `conv_lanes` (then the channels change nothing)."""
  if not any(d.conv_lanes > 0 for d in cluster.devices):
    return None
  return np.array([op.output_shapes[0][-1] if op.output_shapes
                   and op.output_shapes[0] else 0 for op in graph.ops],
                  dtype=np.float64)


def _half_precision(graph: OpGraph, cluster: Cluster
                    ) -> Optional[np.ndarray]:
  """bool [M]: the tensor-core ops in float16 / bfloat16, or None when no
  device of `cluster` has `half_flops`."""
  if not any(d.half_flops > 0 for d in cluster.devices):
    return None
  return np.array([op.type in TENSOR_CORE_OP_TYPES and bool(op.output_dtypes)
                   and op.output_dtypes[0] in HALF_DTYPES
                   for op in graph.ops], dtype=bool)


def _random_values(graph: OpGraph, cluster: Cluster) -> Optional[np.ndarray]:
  """Each random generator's output values (0 for other ops), or None when
  no device of `cluster` has a measured random rate."""
  if not any(d.random_uniform_rate > 0 or d.random_normal_rate > 0
             for d in cluster.devices):
    return None
  random = RANDOM_UNIFORM_OP_TYPES | RANDOM_NORMAL_OP_TYPES
  return np.array([float(np.prod(op.output_shapes[0]))
                   if op.type in random and op.output_shapes else 0.0
                   for op in graph.ops], dtype=np.float64)


def _random_seconds(op_types: Sequence[str], values: np.ndarray,
                    cluster: Cluster) -> np.ndarray:
  """Seconds [N, D] the random generators take at the devices' measured
  rates (0 where a rate or the op's values are missing; a device with k
  slots gives an op 1/k of it, as for the other rates)."""
  out = np.zeros((len(op_types), cluster.num_devices))
  slots = np.array([d.slots for d in cluster.devices], dtype=np.float64)
  for types, field in ((RANDOM_UNIFORM_OP_TYPES, "random_uniform_rate"),
                       (RANDOM_NORMAL_OP_TYPES, "random_normal_rate")):
    rate = np.array([getattr(d, field) for d in cluster.devices]) / slots
    rows = np.array([t in types for t in op_types], dtype=bool)
    per_value = np.divide(1.0, rate, out=np.zeros_like(rate),
                          where=rate > 0)
    out[rows] = values[rows, None] * per_value[None, :]
  return out
