"""Per-op compute costs from TensorFlow grappler's op-level cost estimator.

Grappler (TensorFlow's graph optimizer) ships an analytical estimator
(`OpLevelCostEstimator`, driven by `VirtualScheduler`) that knows the FLOPs
and bytes of many op types from their attributes and static shapes. It is
reachable from Python through a virtual grappler cluster:
`Cluster(devices=[NamedDevice]).MeasureCosts(Item(meta_graph_def))`.

`GrapplerCostModel` runs it once per distinct device figure set of a tfplace
cluster, with every node placed on one virtual device, and reads each node's
estimated time from the returned step stats. Grappler counts cross-device
transfers as free and has no per-op overhead, so only the per-op compute
times are used; the tfplace simulator adds transfers, overhead and memory.
Per op: time = grappler's estimate + the device's `launch_overhead_s`; ops
grappler does not report, and functional control flow (costed from its
bodies), fall back to the analytical model; inf where the device type has no
kernel (`analytical.kernel_mask`).

How tfplace figures become a grappler device (`DeviceProperties`):

* Grappler's CPU formula is FLOP/s = num_cores x frequency (MHz) x 1e6, and
  `bandwidth` is in KB/s. Its per-op estimate depends on the device only
  through these two figures (a "CPU" and a "GPU" device with equal FLOP/s and
  bandwidth give identical per-node times), so a "CPU" device is used for
  every device type: it encodes any FLOP/s exactly.
* Step stats have 1 ns resolution, too coarse for small ops on fast devices.
  The virtual device is therefore `scale` times slower than the real one in
  both FLOP/s and bandwidth (FLOP/s = `VIRTUAL_FLOPS`), and times are divided
  by `scale`; grappler's estimate (compute time + memory time) is linear in
  1 / FLOP/s and 1 / bandwidth, so this is exact up to rounding (bandwidth
  is an integer number of KB/s: relative error <= 0.5 / (1e5 x bandwidth /
  FLOP/s), about 1e-4 for a V100).

Estimates are cached in the model object per (graph, figure set); the graph
key covers names, types, edges, shapes and FLOPs (`graph_key`).
"""

import dataclasses
import hashlib
import time
from typing import Dict, Mapping, Optional, Tuple

from absl import logging
import numpy as np

from tfplace.cost.analytical import AnalyticalCostModel
from tfplace.cost.cluster import Cluster, Device
from tfplace.cost.op_costs import CostModel, OpCosts, kernel_mask
from tfplace.graph.op_graph import OpGraph, StepFetches

# FLOP/s of the virtual grappler device: 1 core at 100 MHz.
VIRTUAL_FREQUENCY_MHZ = 100
VIRTUAL_FLOPS = VIRTUAL_FREQUENCY_MHZ * 1e6
_VIRTUAL_DEVICE = "/job:localhost/replica:0/task:0/device:CPU:0"

# (peak FLOP/s per slot, memory bandwidth per slot): the figures grappler sees.
FigureSet = Tuple[float, float]


@dataclasses.dataclass(frozen=True)
class GrapplerConfig:
  """Options of `GrapplerCostModel`.

  Attributes:
    compute_efficiency: fraction of peak FLOP/s given to grappler, per device
      type (missing types: `default_compute_efficiency`). Grappler itself
      assumes peak.
    default_compute_efficiency: for device types not listed.
    memory_efficiency: fraction of memory bandwidth given to grappler.
    add_launch_overhead: add each device's `launch_overhead_s` per op.
  """
  compute_efficiency: Mapping[str, float] = dataclasses.field(
      default_factory=dict)
  default_compute_efficiency: float = 1.0
  memory_efficiency: float = 1.0
  add_launch_overhead: bool = True


@dataclasses.dataclass(frozen=True)
class GrapplerEstimate:
  """Grappler's per-op times for one figure set.

  Attributes:
    seconds: float64 [M], estimated seconds per op (no overhead); nan where
      grappler reported no time for the op.
    num_matched: ops whose time grappler reported (matched by node name).
    num_reported: nodes grappler reported (including any not in the graph).
    step_time_s: grappler's own single-device step time (transfers free).
    wall_s: seconds the estimation took.
  """
  seconds: np.ndarray
  num_matched: int
  num_reported: int
  step_time_s: float
  wall_s: float


class GrapplerCostModel(CostModel):
  """Op compute times from grappler's op-level cost estimator.

  Grappler's analytical estimator (TensorFlow, `tensorflow/core/grappler/
  costs/op_level_cost_estimator.cc`): compute time from FLOPs at peak plus
  memory time from bytes at peak bandwidth, summed. For per-op compute costs
  only, never for placement rewards (it counts transfers as free).
  """

  name = "grappler"

  def __init__(self, config: GrapplerConfig = GrapplerConfig(),
               fallback: Optional[CostModel] = None):
    """Builds the model.

    Args:
      config: efficiencies and overhead switch.
      fallback: model for ops grappler does not report (default analytical).
    """
    self.config = config
    self.fallback = fallback or AnalyticalCostModel()
    self._cache: Dict[Tuple[str, FigureSet], GrapplerEstimate] = {}

  def figures(self, device: Device) -> FigureSet:
    """The (FLOP/s, bytes/s) one op gets on `device`, as grappler sees them."""
    cfg = self.config
    eff = cfg.compute_efficiency.get(device.type,
                                     cfg.default_compute_efficiency)
    return (float(device.peak_flops * eff / device.slots),
            float(device.memory_bandwidth * cfg.memory_efficiency
                  / device.slots))

  def estimate_on(self, graph: OpGraph, figures: FigureSet) -> GrapplerEstimate:
    """Grappler's per-op times of `graph` on one device (cached)."""
    key = (graph_key(graph), figures)
    if key not in self._cache:
      self._cache[key] = estimate_op_times(graph, *figures)
    return self._cache[key]

  def estimate(self, graph: OpGraph, cluster: Cluster) -> OpCosts:
    """Returns compute seconds [M, D] (grappler + overhead), bytes [M]."""
    base = self.fallback.estimate(graph, cluster)
    seconds = base.compute_s.copy()
    by_figures: Dict[FigureSet, list] = {}
    for j, device in enumerate(cluster.devices):
      by_figures.setdefault(self.figures(device), []).append(j)
    # Grappler costs a While/If/Case op as one op; the fallback costs its
    # bodies (`Op.body`), so it keeps those.
    bodies = np.array([op.body is not None for op in graph.ops], dtype=bool)
    for figures, cols in by_figures.items():
      est = self.estimate_on(graph, figures)
      known = ~np.isnan(est.seconds) & ~bodies
      for j in cols:
        overhead = (cluster.devices[j].launch_overhead_s
                    if self.config.add_launch_overhead else 0.0)
        seconds[known, j] = est.seconds[known] + overhead
    seconds[~kernel_mask(graph, cluster)] = np.inf
    return dataclasses.replace(base, compute_s=seconds)


def graph_key(graph: OpGraph) -> str:
  """The graph's fingerprint extended with its shapes and FLOPs.

  `OpGraph.fingerprint` covers names, types and edges only: two graphs that
  differ only in shapes (another batch size) must not share an estimate.
  """
  h = hashlib.sha256(graph.fingerprint.encode())
  h.update(repr([op.output_shapes for op in graph.ops]).encode())
  h.update(graph.flops.tobytes())
  return h.hexdigest()[:16]


def virtual_device(peak_flops: float, memory_bandwidth: float,
                   memory_bytes: float = 16e9):
  """A grappler `NamedDevice` `scale` times slower than the given figures.

  Returns:
    (named_device, scale): grappler times divided by `scale` are the times
    on a device with `peak_flops` FLOP/s and `memory_bandwidth` bytes/s.
  """
  from tensorflow.core.protobuf import device_properties_pb2
  scale = peak_flops / VIRTUAL_FLOPS
  bandwidth_kbps = max(1, int(round(memory_bandwidth / scale / 1e3)))
  props = device_properties_pb2.DeviceProperties(
      type="CPU", num_cores=1, frequency=VIRTUAL_FREQUENCY_MHZ,
      bandwidth=bandwidth_kbps, memory_size=int(memory_bytes))
  named = device_properties_pb2.NamedDevice(name=_VIRTUAL_DEVICE,
                                            properties=props)
  return named, scale


def estimate_op_times(graph: OpGraph, peak_flops: float,
                      memory_bandwidth: float) -> GrapplerEstimate:
  """Runs grappler's estimator on `graph`, every op on one device.

  Args:
    graph: the OpGraph (its `graph_def` is what grappler reads).
    peak_flops: FLOP/s an op gets.
    memory_bandwidth: bytes/s an op gets.

  Returns:
    The per-op estimate; all nan (and a warning) if grappler fails.
  """
  start = time.perf_counter()
  seconds = np.full(graph.num_ops, np.nan)
  named, scale = virtual_device(peak_flops, memory_bandwidth)
  try:
    nanos, step_s = _run_grappler(graph, named)
  except Exception as e:  # pylint: disable=broad-except
    # Grappler raises assorted errors (ValueError, tf errors, RuntimeError)
    # on graphs it cannot schedule; the fallback model then covers every op.
    logging.warning("grappler could not estimate %s (%s: %s); using the "
                    "fallback model for every op", graph.name,
                    type(e).__name__, e)
    nanos, step_s = {}, float("nan")
  for name, ns in nanos.items():
    i = graph.index.get(name)
    if i is not None:
      seconds[i] = ns * 1e-9 / scale
  matched = int(np.count_nonzero(~np.isnan(seconds)))
  wall = time.perf_counter() - start
  logging.info("grappler: %s, %d of %d ops matched by name (%d nodes "
               "reported), %.3g FLOP/s, %.3g B/s, %.2f s", graph.name, matched,
               graph.num_ops, len(nanos), peak_flops, memory_bandwidth, wall)
  return GrapplerEstimate(seconds=seconds, num_matched=matched,
                          num_reported=len(nanos),
                          step_time_s=step_s * 1e-9 / scale, wall_s=wall)


def _run_grappler(graph: OpGraph, named) -> Tuple[Dict[str, int], float]:
  """(node name -> estimated ns, step ns) on the virtual device `named`."""
  from tensorflow.python.grappler import cluster as grappler_cluster
  from tensorflow.python.grappler import item as grappler_item
  from tfplace.graph.graph_io import meta_graph_def_for
  meta = meta_graph_def_for(_pinned_graph_def(graph, named.name),
                            _all_sinks(graph))
  item = grappler_item.Item(meta, ignore_colocation=True,
                            ignore_user_placement=False)
  cluster = grappler_cluster.Cluster(devices=[named], disable_timeline=False)
  try:
    _, run_time_s, step_stats = cluster.MeasureCosts(item)
  finally:
    cluster.Shutdown()
  nanos: Dict[str, int] = {}
  for dev in step_stats.dev_stats:
    for node in dev.node_stats:
      ns = node.op_end_rel_nanos - node.op_start_rel_nanos
      nanos[node.node_name] = nanos.get(node.node_name, 0) + ns
  return nanos, float(run_time_s) * 1e9


def _pinned_graph_def(graph: OpGraph, device: str):
  """The graph's GraphDef with every node on `device` and Placeholder shapes
  resolved as the importer resolved them (grappler needs static shapes)."""
  import tensorflow as tf
  graph_def = tf.compat.v1.GraphDef()
  graph_def.CopyFrom(graph.graph_def)
  for node in graph_def.node:
    node.device = device
    i = graph.index.get(node.name)
    if node.op == "Placeholder" and i is not None:
      shapes = graph.ops[i].output_shapes
      if shapes and "shape" in node.attr:
        node.attr["shape"].shape.CopyFrom(
            tf.TensorShape(shapes[0]).as_proto())
  return graph_def


def _all_sinks(graph: OpGraph) -> StepFetches:
  """The train ops plus every op without consumers, so grappler (which
  schedules only the fan-in of its fetches) reaches every op."""
  ptr, _ = graph.successors_csr
  sinks = [graph.ops[i].name for i in np.flatnonzero(np.diff(ptr) == 0)]
  names = list(dict.fromkeys(list(graph.fetches.train_ops) + sinks))
  return StepFetches(train_ops=tuple(names))
