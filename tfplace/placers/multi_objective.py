"""Mayer et al.'s multi-objective placement heuristic.

Mayer, Mayer & Laich, The TensorFlow Partitioning and Scheduling Problem:
It's the Critical Path! (DIDL workshop, Middleware 2017): besides hash and
critical-path partitioning, a heuristic that scores every candidate device
by several objectives at once and weighs them. Here, for each group in
topological order and each device that can run it (and has memory left by
the estimate, if any has), four scores in [0, 1], higher is better:
  * memory: the share of the device's memory still free after the group;
  * importance: how critical the group is (the longest path through it
    over the critical path's length, fastest-device compute) times how fast
    the device runs it relative to its fastest device;
  * traffic: the share of the bytes from its already-placed predecessor
    groups that are on the device (no transfer);
  * execution time: its earliest finish time on the fastest choice over its
    earliest finish on this device (device load, predecessors' finish plus
    a transfer when they are elsewhere).
The group goes to the device with the largest weighted sum; the weights are
options.
"""

import dataclasses
from typing import Optional

import numpy as np

from tfplace.cost.cluster import Cluster
from tfplace.graph.op_graph import OpGraph
from tfplace.grouping.group_graph import GroupGraph
from tfplace.placement import Placement
from tfplace.placers.base import Placer, PlacerKind
from tfplace.placers.registry import register_placer


@dataclasses.dataclass(frozen=True)
class MultiObjectiveWeights:
  """Weights of the four objectives.

  Attributes:
    memory: weight of the free-memory score.
    importance: weight of the critical-path score.
    traffic: weight of the data-locality score.
    execution_time: weight of the earliest-finish score.
  """
  memory: float = 0.1
  importance: float = 0.5
  traffic: float = 0.5
  execution_time: float = 1.0


def group_importance(graph: OpGraph, groups: GroupGraph,
                     op_time: np.ndarray) -> np.ndarray:
  """float [G] in [0, 1]: the longest source-to-sink path through any op of
  the group over the critical path's length (op times `op_time` [M])."""
  ptr, pred = graph.predecessors_csr
  sptr, succ = graph.successors_csr
  top = np.zeros(graph.num_ops)
  bottom = np.zeros(graph.num_ops)
  order = graph.topo_order
  for i in order:
    p = pred[ptr[i]:ptr[i + 1]]
    top[i] = (top[p] + op_time[p]).max() if len(p) else 0.0
  for i in order[::-1]:
    s = succ[sptr[i]:sptr[i + 1]]
    bottom[i] = op_time[i] + (bottom[s].max() if len(s) else 0.0)
  through = top + bottom
  longest = through.max() if len(through) else 0.0
  per_group = np.zeros(groups.num_groups)
  np.maximum.at(per_group, groups.group_of, through)
  return per_group / longest if longest > 0 else per_group


class _State:
  """Loads, memory and finish times while groups are placed one by one."""

  def __init__(self, groups: GroupGraph, cluster: Cluster):
    self.capacity = np.array([d.memory_bytes for d in cluster.devices], float)
    self.used = np.zeros(cluster.num_devices)
    self.load = np.zeros(cluster.num_devices)
    self.finish = np.zeros(groups.num_groups)
    self.device = np.full(groups.num_groups, -1, np.int32)
    off = ~np.eye(cluster.num_devices, dtype=bool)
    self.latency = float(cluster.link_latency[off].max()) if off.any() else 0.
    self.bandwidth = (float(cluster.link_bandwidth[off].min()) if off.any()
                      else np.inf)


def _scores(g, preds, groups, state, importance, w) -> np.ndarray:
  """The weighted score of every device for group g (-inf: not allowed)."""
  allowed = groups.allowed[g]
  compute = np.where(allowed, groups.compute_s[g], np.inf)
  need = groups.memory_bytes[g]
  free_after = 1.0 - (state.used + need) / state.capacity
  memory_ok = allowed & (free_after >= 0)
  candidates = memory_ok if memory_ok.any() else allowed
  src, nbytes = preds
  placed = state.device[src] >= 0
  src, nbytes = src[placed], nbytes[placed]
  ready = np.zeros(len(compute))
  for p, b in zip(src, nbytes):
    delay = state.latency + b / state.bandwidth if b > 0 else 0.0
    arrive = np.full(len(compute), state.finish[p] + delay)
    arrive[state.device[p]] = state.finish[p]
    ready = np.maximum(ready, arrive)
  finish = np.maximum(ready, state.load) + compute
  local = np.bincount(state.device[src], weights=nbytes,
                      minlength=len(compute))
  traffic = local / nbytes.sum() if nbytes.sum() > 0 else np.zeros_like(local)
  score = (w.memory * np.clip(free_after, 0.0, 1.0)
           + w.importance * importance[g] * _ratio(compute[allowed].min(),
                                                   compute)
           + w.traffic * traffic
           + w.execution_time * _ratio(finish[candidates].min(), finish))
  # Ties (e.g. free ops with no placed predecessor): the least loaded.
  score = score - 1e-9 * state.load / max(state.load.max(), 1e-30)
  return np.where(candidates, score, -np.inf), finish


def _ratio(best: float, values: np.ndarray) -> np.ndarray:
  """best / values in [0, 1] (1 where both are 0, 0 where values is inf)."""
  with np.errstate(divide="ignore", invalid="ignore"):
    out = np.where(values > 0, best / values, 1.0)
  return np.where(np.isfinite(values), out, 0.0)


def multi_objective_placement(graph: OpGraph, groups: GroupGraph,
                              cluster: Cluster, op_time: np.ndarray,
                              weights: MultiObjectiveWeights) -> np.ndarray:
  """int32 [G]: a device per group by the weighted objectives.

  Args:
    graph: the op graph (for the critical path).
    groups: its group graph (colocation groups).
    cluster: devices and links.
    op_time: float [M], op times on the fastest device (for importance).
    weights: the objectives' weights.
  """
  importance = group_importance(graph, groups, op_time)
  state = _State(groups, cluster)
  rank = groups.topo_rank
  forward = rank[groups.edge_src] < rank[groups.edge_dst]
  src, dst = groups.edge_src[forward], groups.edge_dst[forward]
  nbytes = groups.edge_bytes[forward].astype(np.float64)
  order = np.argsort(dst, kind="stable")
  src, dst, nbytes = src[order], dst[order], nbytes[order]
  ptr = np.searchsorted(dst, np.arange(groups.num_groups + 1))
  for g in groups.topo_order():
    preds = (src[ptr[g]:ptr[g + 1]], nbytes[ptr[g]:ptr[g + 1]])
    score, finish = _scores(g, preds, groups, state, importance, weights)
    d = int(np.argmax(score))
    state.device[g] = d
    state.used[d] += groups.memory_bytes[g]
    state.load[d] = finish[d]
    state.finish[g] = finish[d]
  return state.device


@register_placer("multi_objective")
class MultiObjectivePlacer(Placer):
  """Mayer et al.'s multi-objective heuristic (The TensorFlow Partitioning
  and Scheduling Problem: It's the Critical Path!, DIDL 2017): each
  colocation group, in topological order, goes to the device with the best
  weighted score over memory, importance (critical path), traffic and
  execution time. See the module docstring.
  """

  kind = PlacerKind.HEURISTIC
  uses_seed = False

  @dataclasses.dataclass(frozen=True)
  class Options:
    """Options of `multi_objective` (the objectives' weights, >= 0).

    Attributes:
      memory_weight: weight of the free-memory score.
      importance_weight: weight of the critical-path score.
      traffic_weight: weight of the data-locality score.
      execution_time_weight: weight of the earliest-finish score.
    """
    memory_weight: float = MultiObjectiveWeights.memory
    importance_weight: float = MultiObjectiveWeights.importance
    traffic_weight: float = MultiObjectiveWeights.traffic
    execution_time_weight: float = MultiObjectiveWeights.execution_time

    def __post_init__(self):
      for field in dataclasses.fields(self):
        if not getattr(self, field.name) >= 0:
          raise ValueError(f"{field.name} must be >= 0, got "
                           f"{getattr(self, field.name)}")

  def place(self, problem, seed: Optional[int] = None) -> Placement:
    del seed  # Deterministic.
    o = self.options
    weights = MultiObjectiveWeights(o.memory_weight, o.importance_weight,
                                    o.traffic_weight, o.execution_time_weight)
    compute = np.asarray(problem.costs.compute_s, dtype=np.float64)
    op_time = np.where(np.isfinite(compute), compute, np.inf).min(axis=1)
    op_time = np.where(np.isfinite(op_time), op_time, 0.0)
    devices = multi_objective_placement(problem.graph, problem.groups,
                                        problem.cluster, op_time, weights)
    return problem.placement(devices, self.name)
