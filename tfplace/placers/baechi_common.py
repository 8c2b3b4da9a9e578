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
    charge_received: also charge a device the tensors its ops receive from
      other devices, at the activation share (`MemoryState`). False is
      Baechi's estimate, which leaves them out: `activation_fraction=1.0,
      charge_received=False` is Baechi as published.
    max_lp_edges: m-SCT only: above this many (deduplicated) data edges the
      LP is not solved and m-SCT falls back to m-ETF.
  """
  use_cpu: bool = False
  memory_fraction: float = 1.0
  charge_received: bool = True
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

  A group charges its `MemoryBudget` need (parameters plus its outputs at
  the activation share) when it is bound, i.e. when its first op is placed.
  With `BaechiOptions.charge_received` it also charges, at the same share,
  every tensor its members take from other groups, unless the producer is
  already on the same device: a received tensor is held on the receiver
  until its consumers there have run, and many are held at once where a
  sum waits for all its terms (RNNLM's weight gradients, 35 time steps of
  34 MB each, all received by the variable's device before its AddN runs).
  The group is bound before most of its producers are placed (a variable's
  group at the forward pass, its gradient sum at the end), so the charge is
  made then, and given back when a producer is later placed on the same
  device. Each producer is charged once per device.

  Attributes:
    budget: the `MemoryBudget` (bytes charged per device).
    group_device: int [G], the device a group is bound to, -1 if unbound.
    op_device: int [M], the device an op is bound to, -1 if unbound.
  """

  def __init__(self, view: OpView):
    self.view = view
    share = view.options.activation_fraction
    self.share = 1.0 if share is None else share
    self.budget = MemoryBudget(view.groups, view.cluster, self.share,
                               view.options.memory_fraction)
    self.group_device = np.full(view.num_groups, -1, dtype=np.int64)
    self.op_device = np.full(view.num_ops, -1, dtype=np.int64)
    self.overflowed = False
    self._receives = view.options.charge_received and self.share > 0
    # Per group, the most it can be charged for received tensors (all of
    # them): where that fits, `received` need not be computed.
    self._most_received = np.zeros(view.num_groups)
    if self._receives:
      self._in_ptr, self._in_src, self._in_bytes = _group_inputs(view)
      self._most_received = np.add.reduceat(
          np.append(self._in_bytes, 0.0), self._in_ptr[:-1]) * self.share
      self._most_received[np.diff(self._in_ptr) == 0] = 0.0
    # [M, D]: bytes of each producer's output charged on each device.
    self._charged = np.zeros((view.num_ops, view.num_devices))
    self._binds = 0  # Ops bound so far: the version of `_cache`.
    self._cache = {}

  def received(self, group: int) -> np.ndarray:
    """float64 [D]: bytes binding `group` to each device would add for the
    tensors it receives (0 without `charge_received`)."""
    if not self._receives:
      return np.zeros(self.view.num_devices)
    cached = self._cache.get(group)
    if cached is not None and cached[0] == self._binds:
      return cached[1]
    a, b = self._in_ptr[group], self._in_ptr[group + 1]
    src, nbytes = self._in_src[a:b], self._in_bytes[a:b]
    extra = np.maximum(nbytes[:, None] - self._charged[src], 0.0)
    extra[self.op_device[src][:, None] ==
          np.arange(self.view.num_devices)[None, :]] = 0.0
    out = extra.sum(axis=0) * self.share
    self._cache[group] = (self._binds, out)
    return out

  def fits(self, op: int, device: int) -> bool:
    """True if `op` may go to `device`: its group is bound there, or is
    unbound and has a kernel and memory there."""
    g = self.view.group_of[op]
    bound = self.group_device[g]
    if bound >= 0:
      return bound == device
    if not self.view.group_allowed[g, device]:
      return False
    if self.budget.fits(g, device, self._most_received[g]) or (
        self.budget.fits(g, device, self.received(g)[device])):
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
    room = self.budget.room(g, self._most_received[g])
    if (allowed & ~room).any():
      room = self.budget.room(g, self.received(g))
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
    """Binds `op` (and its group, if unbound) to `device` and charges what it
    brings there; True if the group was newly bound."""
    g = self.view.group_of[op]
    if self.group_device[g] >= 0 and self.group_device[g] != device:
      raise AssertionError("colocation group placed on two devices")
    self.op_device[op] = device
    self._binds += 1
    if self._receives and self._charged[op, device] > 0:
      # Its consumers there no longer receive it: it is charged as an output.
      self.budget.used[device] -= self._charged[op, device] * self.share
      self._charged[op, device] = 0.0
    if self.group_device[g] >= 0:
      return False
    if self._receives:
      extra = self.received(g)[device]
      a, b = self._in_ptr[g], self._in_ptr[g + 1]
      src, nbytes = self._in_src[a:b], self._in_bytes[a:b]
      remote = self.op_device[src] != device
      np.maximum.at(self._charged[:, device], src[remote], nbytes[remote])
      self.budget.used[device] += extra
    self.group_device[g] = device
    self.budget.add(g, device)
    return True


def _group_inputs(view: OpView):
  """CSR by group of the producers outside the group its members read:
  (ptr [G + 1], producer op ids, bytes: the most one producer sends one
  member)."""
  counts = np.diff(view.pred_ptr)
  dst = np.repeat(np.arange(view.num_ops), counts)
  src, nbytes = view.pred_src, view.pred_bytes
  g_dst = view.group_of[dst]
  outside = view.group_of[src] != g_dst
  g_dst, src, nbytes = g_dst[outside], src[outside], nbytes[outside]
  key = g_dst * view.num_ops + src
  uniq, inverse = np.unique(key, return_inverse=True)
  most = np.zeros(len(uniq))
  np.maximum.at(most, inverse, nbytes)
  groups = uniq // view.num_ops
  ptr = np.zeros(view.num_groups + 1, dtype=np.int64)
  np.cumsum(np.bincount(groups, minlength=view.num_groups), out=ptr[1:])
  return ptr, uniq % view.num_ops, most


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
