"""Shared pieces of Baechi's memory-constrained placers (m-TOPO, m-ETF, m-SCT).

Baechi (Jeon, Liu, Xu et al., "Baechi: Fast Device Placement of Machine
Learning Graphs", ACM SoCC 2020) places op graphs in seconds with three list
algorithms that never put more on a device than its memory holds. This module
holds what the three share:

* `BaechiOptions`: which devices to use and how much of their memory.
* `OpView`: the op-level arrays a list scheduler needs (compute time per op
  and device, predecessors with bytes, a b-level priority), built once with
  NumPy on top of the problem's colocation groups (`GroupGraph`: members,
  devices with kernels) and the DAG view of the `OpGraph`.
* `MemoryState`: the binding of colocation groups to devices, charging each
  group's memory to a `tfplace.grouping.memory.MemoryBudget` (the one memory
  estimate every placer uses) when its first op is placed; every later op of
  the group goes to the same device.
"""

import abc
import dataclasses
from typing import Optional, Tuple

import numpy as np
from absl import logging

from tfplace.cost.cluster import Cluster
from tfplace.errors import PlacementError
from tfplace.graph import paths
from tfplace.graph.op_graph import OpGraph
from tfplace.grouping.group_graph import GroupGraph
from tfplace.grouping.memory import MemoryBudget
from tfplace.placement import Placement
from tfplace.placers import baechi_memory
from tfplace.placers.base import Placer
from tfplace.placers.problem import PlacementProblem


@dataclasses.dataclass(frozen=True)
class BaechiOptions:
  """Options shared by m-TOPO, m-ETF and m-SCT.

  Attributes:
    use_cpu: if False and the cluster has non-CPU devices, CPUs only take ops
      (groups) that have no kernel on any accelerator, as in Baechi, which
      places on GPUs. If True, every device is a candidate.
    memory_fraction: fraction of each device's `memory_bytes` the placer may
      fill (headroom for what the estimate misses).
    activation_fraction: fraction of each op's output bytes charged to its
      device (1.0: every activation alive at once, Baechi's conservative
      estimate; real peaks are lower because gradients are freed early).
      None (default): 1.0, then smaller shares where memory binds, checked
      on the simulator (`tfplace.placers.baechi_memory`).
    max_lp_edges: m-SCT only: above this many (deduplicated) data edges the
      LP is not solved and m-SCT falls back to m-ETF.
  """
  use_cpu: bool = False
  memory_fraction: float = 1.0
  activation_fraction: Optional[float] = None
  max_lp_edges: int = 50_000

  def __post_init__(self):
    if not 0.0 < self.memory_fraction <= 1.0:
      raise PlacementError(
          f"memory_fraction must be in (0, 1], got {self.memory_fraction}")
    if (self.activation_fraction is not None and
        not 0.0 <= self.activation_fraction <= 1.0):
      raise PlacementError(f"activation_fraction must be in [0, 1], got "
                           f"{self.activation_fraction}")
    if self.max_lp_edges < 0:
      raise PlacementError(f"max_lp_edges must be >= 0, got {self.max_lp_edges}")


class OpView:
  """Op-level arrays of one placement problem for the list placers.

  Attributes:
    num_ops, num_devices: M and D.
    groups: the colocation groups (`GroupGraph`).
    compute: float64 [M, D], seconds; inf where the op's group may not go.
    group_of: int [M] colocation group per op.
    group_members: op-index arrays per group.
    group_allowed: bool [G, D], devices with a kernel for every member (and
      preferred by the options).
    pred_ptr, pred_src, pred_bytes: CSR of deduplicated predecessors (src op,
      bytes summed over the tensors src sends this op); loop back edges left out.
    succ_ptr, succ_dst: CSR of deduplicated successors.
    topo_order: int [M].
    candidate_devices: the devices the work is spread over (accelerators,
      unless `use_cpu` or the cluster has only CPUs).
    latency, bandwidth: [D, D] link matrices of the cluster.
  """

  def __init__(self, problem: PlacementProblem, options: BaechiOptions):
    graph, cluster, groups = problem.graph, problem.cluster, problem.groups
    self.graph, self.cluster, self.options = graph, cluster, options
    self.groups = groups
    self.num_ops, self.num_devices = graph.num_ops, cluster.num_devices
    self.group_of = np.asarray(groups.group_of, dtype=np.int64)
    self.group_members = groups.members
    self.group_allowed = _group_allowed(graph, cluster, groups, options.use_cpu)
    is_cpu = np.array([dev.type == "CPU" for dev in cluster.devices])
    spread = (np.ones(self.num_devices, dtype=bool)
              if options.use_cpu or is_cpu.all() else ~is_cpu)
    # The devices the work is spread over (accelerators unless use_cpu).
    self.candidate_devices = np.flatnonzero(spread)
    compute = np.asarray(problem.costs.compute_s, dtype=np.float64).copy()
    compute[~self.group_allowed[self.group_of]] = np.inf
    self.compute = compute
    self.min_compute = compute.min(axis=1)
    self.pred_ptr, self.pred_src, self.pred_bytes, self.succ_ptr, \
        self.succ_dst = _dedup_adjacency(graph)
    self.topo_order = np.asarray(graph.topo_order, dtype=np.int64)
    self.latency = np.asarray(cluster.link_latency, dtype=np.float64)
    self.bandwidth = np.asarray(cluster.link_bandwidth, dtype=np.float64)
    # Set by `MemoryState` when memory, not a kernel, rules a device out.
    self.memory_turned_away = False

  @property
  def num_groups(self) -> int:
    return len(self.group_members)

  def preds(self, op: int) -> Tuple[np.ndarray, np.ndarray]:
    """(predecessor op ids, bytes each sends `op`)."""
    a, b = self.pred_ptr[op], self.pred_ptr[op + 1]
    return self.pred_src[a:b], self.pred_bytes[a:b]

  def succs(self, op: int) -> np.ndarray:
    return self.succ_dst[self.succ_ptr[op]:self.succ_ptr[op + 1]]

  def mean_link(self) -> Tuple[float, float]:
    """(latency, bandwidth) averaged over links between candidate devices."""
    used = np.flatnonzero(self.group_allowed.any(axis=0))
    if len(used) < 2:
      return 0.0, np.inf
    lat = self.latency[np.ix_(used, used)]
    bw = self.bandwidth[np.ix_(used, used)]
    off = ~np.eye(len(used), dtype=bool)
    return float(lat[off].mean()), float(1.0 / np.mean(1.0 / bw[off]))

  def blevel(self) -> np.ndarray:
    """Longest path (min compute, no communication) from each op to a sink."""
    level = np.where(np.isfinite(self.min_compute), self.min_compute, 0.0)
    return paths.bottom_levels(self.graph, level)


def _group_allowed(graph: OpGraph, cluster: Cluster, groups: GroupGraph,
                   use_cpu: bool) -> np.ndarray:
  """bool [G, D]: devices with a kernel for every member of each group,
  accelerators only for groups that have one (unless `use_cpu`)."""
  kernel_ok = groups.allowed
  empty = np.flatnonzero(~kernel_ok.any(axis=1))
  if len(empty):
    names = [graph.ops[i].name for i in groups.members[empty[0]][:3]]
    raise PlacementError(
        f"{len(empty)} colocation group(s) have no device with a kernel for "
        f"all their ops, e.g. the group of {', '.join(names)}")
  is_cpu = np.array([dev.type == "CPU" for dev in cluster.devices])
  if use_cpu or is_cpu.all():
    return kernel_ok
  preferred = kernel_ok & ~is_cpu
  no_accel = ~preferred.any(axis=1)
  preferred[no_accel] = kernel_ok[no_accel]
  return preferred


def _dedup_adjacency(graph: OpGraph):
  """Predecessor CSR with bytes and successor CSR, one entry per op pair."""
  src, dst, _, nbytes = graph.edge_arrays
  m = graph.num_ops
  keep = graph.dag_edge_mask & (src != dst)
  src = np.asarray(src, dtype=np.int64)[keep]
  dst = np.asarray(dst, dtype=np.int64)[keep]
  nbytes = np.asarray(nbytes)[keep]
  key = dst * m + src
  uniq, inverse = np.unique(key, return_inverse=True)
  pair_bytes = np.bincount(inverse, weights=nbytes.astype(np.float64),
                           minlength=len(uniq)) if len(uniq) else np.zeros(0)
  p_dst, p_src = uniq // m, uniq % m
  pred_ptr = np.zeros(m + 1, dtype=np.int64)
  np.cumsum(np.bincount(p_dst, minlength=m), out=pred_ptr[1:])
  order = np.lexsort((p_dst, p_src))
  succ_ptr = np.zeros(m + 1, dtype=np.int64)
  np.cumsum(np.bincount(p_src, minlength=m), out=succ_ptr[1:])
  return pred_ptr, p_src, pair_bytes, succ_ptr, p_dst[order]


class MemoryState:
  """Colocation-group bindings and the memory they charge.

  Attributes:
    budget: the `MemoryBudget` (bytes charged per device).
    group_device: int [G], the device a group is bound to, -1 if unbound.
  """

  def __init__(self, view: OpView):
    self.view = view
    share = view.options.activation_fraction
    self.budget = MemoryBudget(view.groups, view.cluster,
                               1.0 if share is None else share,
                               view.options.memory_fraction)
    self.group_device = np.full(view.num_groups, -1, dtype=np.int64)
    self.overflowed = False

  def fits(self, group: int, device: int) -> bool:
    """True if `group` may be bound to `device` (kernels and memory)."""
    if not self.view.group_allowed[group, device]:
      return False
    if self.budget.fits(group, device):
      return True
    self.view.memory_turned_away = True
    return False

  def devices_for(self, op: int) -> np.ndarray:
    """Devices `op` can go to now: its group's device, or all that fit."""
    g = self.view.group_of[op]
    bound = self.group_device[g]
    if bound >= 0:
      return np.array([bound])
    allowed = self.view.group_allowed[g]
    room = self.budget.room(g)
    if (allowed & ~room).any():
      self.view.memory_turned_away = True
    return np.flatnonzero(allowed & room)

  def fallback_device(self, op: int) -> int:
    """The allowed device with most free memory, for a group that fits nowhere."""
    g = self.view.group_of[op]
    device = self.budget.most_free(g, self.view.group_allowed[g])
    if not self.overflowed:
      logging.warning(
          "colocation group of op %s (%.3g MB) fits on no device; placing it on "
          "device %d anyway (the placement will be out of memory)",
          self.view.graph.ops[op].name, self.budget.need[g] / 1e6, device)
    self.overflowed = True
    return device

  def bind(self, op: int, device: int) -> bool:
    """Binds `op`'s group to `device` if unbound; True if it was newly bound."""
    g = self.view.group_of[op]
    if self.group_device[g] >= 0:
      if self.group_device[g] != device:
        raise AssertionError("colocation group placed on two devices")
      return False
    self.group_device[g] = device
    self.budget.add(g, device)
    return True


class BaechiPlacer(Placer):
  """What the three Baechi placers share: the options, the op-level view, and
  the placement from per-op device ids. Subclasses implement `device_ids`.
  """

  Options = BaechiOptions
  uses_seed = False

  def place(self, problem: PlacementProblem,
            seed: Optional[int] = None) -> Placement:
    """Returns the placement (deterministic; `seed` is unused). With
    `activation_fraction` unset, the share is checked on the simulator
    where memory binds (`tfplace.placers.baechi_memory`)."""
    if self.options.activation_fraction is not None:
      return self._place_with(problem, self.options)[0]
    return baechi_memory.place_within_memory(problem, self._place_with,
                                             self.options)

  def _place_with(self, problem: PlacementProblem,
                  options: BaechiOptions) -> Tuple[Placement, bool]:
    """(the placement with `options`, whether memory turned a device away)."""
    view = OpView(problem, options)
    device_of = self.device_ids(view)
    return (to_placement(view, device_of, self.name),
            bool(view.memory_turned_away))

  @abc.abstractmethod
  def device_ids(self, view: OpView) -> np.ndarray:
    """int [M]: the device of each op."""


def to_placement(view: OpView, device_of: np.ndarray, placer: str) -> Placement:
  """Builds a `Placement` from device ids per op; checks no op is unplaced."""
  device_of = np.asarray(device_of)
  if (device_of < 0).any():
    raise AssertionError(f"{placer}: {(device_of < 0).sum()} ops unplaced")
  return Placement.from_array(view.graph, view.cluster, device_of,
                              placer=placer)


def transfer_matrix(view: OpView, src_devices: np.ndarray,
                    nbytes: np.ndarray) -> np.ndarray:
  """[P, D] seconds to move `nbytes[p]` from `src_devices[p]` to each device."""
  lat = view.latency[src_devices]  # [P, D], 0 on the source column.
  bw = view.bandwidth[src_devices]  # inf on the source column.
  return lat + nbytes[:, None] / bw
