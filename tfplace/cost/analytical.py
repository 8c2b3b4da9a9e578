"""Analytical op costs: a roofline estimate per op and device.

    time(op, device) = max(flops / (peak_flops / slots * efficiency),
                           bytes_moved / (memory_bandwidth / slots * mem_eff))
                       + launch_overhead_s

with bytes_moved = input bytes + output bytes. A device with `slots` = k runs
k ops at once and shares its peak among them, so each op gets 1/k of it
(total throughput stays the device's peak). The time is inf where the device
type has no kernel for the op. Trivial ops (NoOp, Const, Identity, variable
handles and reads, shape queries...) cost `trivial_overhead_factor` times the
launch overhead and nothing else.
"""

import dataclasses
from typing import FrozenSet, Mapping

import numpy as np

from tfplace.cost.cluster import Cluster
from tfplace.cost.op_costs import CostModel, OpCosts, kernel_mask
from tfplace.graph.op_graph import OpGraph

TRIVIAL_OP_TYPES = frozenset({
    "NoOp", "Const", "HostConst", "Identity", "IdentityN", "StopGradient",
    "PreventGradient", "Snapshot", "VarHandleOp", "VariableV2", "Variable",
    "ReadVariableOp", "VarIsInitializedOp", "Placeholder",
    "PlaceholderWithDefault", "Shape", "ShapeN", "Size", "Rank", "Reshape",
    "Squeeze", "ExpandDims", "_Arg", "_Retval", "Assert", "ControlTrigger",
    "Enter", "Exit", "NextIteration", "Merge", "Switch", "LoopCond",
    "BroadcastGradientArgs",
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
    cfg = self.config
    flops = graph.flops[:, None]
    moved = (graph.input_bytes + graph.output_bytes).astype(np.float64)[:, None]
    devices = cluster.devices
    eff = np.array([cfg.compute_efficiency.get(d.type,
                                               cfg.default_compute_efficiency)
                    for d in devices])
    slots = np.array([d.slots for d in devices], dtype=np.float64)
    peak = np.array([d.peak_flops for d in devices]) * eff / slots
    bandwidth = (np.array([d.memory_bandwidth for d in devices])
                 * cfg.memory_efficiency / slots)
    overhead = np.array([d.launch_overhead_s for d in devices])
    compute = np.maximum(flops / peak[None, :], moved / bandwidth[None, :])
    scale = np.array([cfg.op_type_scale.get(t, 1.0) for t in graph.op_types])
    compute *= scale[:, None]
    trivial = np.array([t in cfg.trivial_op_types for t in graph.op_types])
    compute[trivial] = 0.0
    over = np.where(trivial[:, None], cfg.trivial_overhead_factor, 1.0)
    seconds = compute + over * overhead[None, :]
    seconds[~kernel_mask(graph, cluster)] = np.inf
    return OpCosts(compute_s=seconds, param_bytes=graph.param_bytes.copy(),
                   output_bytes=graph.output_bytes.copy())
