"""The task graph and CP-SAT model of the `cp_sat` placer.

A coarse group may be left and re-entered by the data flow (a variable's
group holds its read, early, and its update, late), so groups cannot be
scheduled as single tasks. The tasks are the runs of one group in a
topological order of the step's ops that keeps each group's ops together
where it can (Kahn's algorithm, preferring an op of the group just
emitted): every task is a contiguous range of that order, so the task graph
is acyclic, and all tasks of a group share the group's device.

The model (OR-Tools CP-SAT; Perron & Didier, CP-SAT, Google OR-Tools
v9.10, 2024), in integer time units:
  x[g, d]                  group g on device d (exactly one, allowed only)
  sum_g mem[g] x[g, d] <= memory[d]                     (hard)
  end[t] = start[t] + sum_d dur[t, d] x[group(t), d]
  one optional interval per (task, allowed device), present iff x; per
  device NoOverlap (1 slot) or Cumulative (capacity = slots)
  start[v] >= end[u] + delay(u, v) * cross[g(u), g(v)]  per task edge
  cross[a, b] >= x[a, d] - x[b, d]  (1 when a and b are on different devices)
  makespan >= end[t]; minimize makespan.
The delay of an edge is the slowest link's latency + bytes / bandwidth
(links are not modelled as resources: transfers overlap freely).
"""

import dataclasses
import heapq
from typing import Dict, List, Optional, Tuple

import numpy as np

from tfplace.cost.cluster import Cluster
from tfplace.cost.op_costs import OpCosts
from tfplace.graph.op_graph import OpGraph


@dataclasses.dataclass(frozen=True)
class TaskGraph:
  """Tasks (runs of one group's ops) and the edges between them.

  Attributes:
    group: int [T], the group of each task.
    duration_s: float [T, D], summed compute of the task's ops per device.
    edge_src, edge_dst: int [E], task edges (src before dst).
    edge_bytes: float [E], bytes crossing (0 for control edges).
  """
  group: np.ndarray
  duration_s: np.ndarray
  edge_src: np.ndarray
  edge_dst: np.ndarray
  edge_bytes: np.ndarray

  @property
  def num_tasks(self) -> int:
    return len(self.group)


def _grouped_topo_order(graph: OpGraph, labels: np.ndarray,
                        keep: np.ndarray) -> List[int]:
  """A topological order of the ops in `keep` that stays in one group as
  long as that group has a ready op (ties by the graph's own order)."""
  ptr, succ = graph.successors_csr
  rank = np.empty(graph.num_ops, np.int64)
  rank[graph.topo_order] = np.arange(graph.num_ops)
  indeg = np.zeros(graph.num_ops, np.int64)
  for i in np.flatnonzero(keep):
    for j in succ[ptr[i]:ptr[i + 1]]:
      indeg[j] += keep[j]
  ready: Dict[int, list] = {}
  anywhere: list = []
  for i in np.flatnonzero(keep & (indeg == 0)):
    heapq.heappush(ready.setdefault(int(labels[i]), []), (rank[i], int(i)))
    heapq.heappush(anywhere, (rank[i], int(i)))
  order, emitted, current = [], np.zeros(graph.num_ops, bool), -1
  while anywhere:
    queue = ready.get(current)
    while queue and emitted[queue[0][1]]:
      heapq.heappop(queue)
    if not queue:
      _, i = heapq.heappop(anywhere)
      if emitted[i]:
        continue
    else:
      _, i = heapq.heappop(queue)
    emitted[i] = True
    order.append(i)
    current = int(labels[i])
    for j in succ[ptr[i]:ptr[i + 1]]:
      if keep[j]:
        indeg[j] -= 1
        if indeg[j] == 0:
          heapq.heappush(ready.setdefault(int(labels[j]), []), (rank[j], int(j)))
          heapq.heappush(anywhere, (rank[j], int(j)))
  return order


def build_tasks(graph: OpGraph, costs: OpCosts,
                labels: np.ndarray) -> TaskGraph:
  """The task graph of the training step's ops grouped by `labels` [M]
  (dense group ids 0..G-1)."""
  keep = graph.step_mask.copy()
  order = _grouped_topo_order(graph, labels, keep)
  task_of = np.full(graph.num_ops, -1, np.int64)
  groups, t = [], -1
  for pos, i in enumerate(order):
    if pos == 0 or labels[i] != labels[order[pos - 1]]:
      t += 1
      groups.append(int(labels[i]))
    task_of[i] = t
  compute = np.asarray(costs.compute_s, dtype=np.float64)
  duration = np.zeros((t + 1, compute.shape[1]))
  np.add.at(duration, task_of[keep], compute[keep])
  src, dst, _, nbytes = graph.edge_arrays
  ts, td = task_of[src], task_of[dst]
  inside = (ts >= 0) & (td >= 0) & (ts != td)
  key = ts[inside] * (t + 1) + td[inside]
  uniq, inverse = np.unique(key, return_inverse=True)
  total = np.bincount(inverse, weights=nbytes[inside].astype(np.float64),
                      minlength=len(uniq))
  return TaskGraph(group=np.array(groups, np.int64), duration_s=duration,
                   edge_src=uniq // (t + 1), edge_dst=uniq % (t + 1),
                   edge_bytes=total)


@dataclasses.dataclass(frozen=True)
class CpSatModel:
  """The built model, its variables and integer data.

  Attributes:
    model: the `cp_model.CpModel`.
    assign: (group, device) -> BoolVar.
    start, end: IntVar per task.
    cross: (group a, group b), a < b -> BoolVar (on different devices).
    makespan: IntVar.
    duration: int [T, D], task durations in time units.
    delay: int [E], edge delays in time units.
    time_unit_s: seconds per time unit.
  """
  model: object
  assign: Dict[Tuple[int, int], object]
  start: List[object]
  end: List[object]
  cross: Dict[Tuple[int, int], object]
  makespan: object
  duration: np.ndarray
  delay: np.ndarray
  time_unit_s: float

  def add_hint(self, group_devices: np.ndarray, start: np.ndarray,
               end: np.ndarray) -> None:
    """Hints every variable: the assignment `group_devices` [G] and a
    schedule of it (`list_schedule`: a feasible solution)."""
    for (g, d), var in self.assign.items():
      self.model.AddHint(var, int(group_devices[g] == d))
    for t in range(len(self.start)):
      self.model.AddHint(self.start[t], int(start[t]))
      self.model.AddHint(self.end[t], int(end[t]))
    for (a, b), var in self.cross.items():
      self.model.AddHint(var, int(group_devices[a] != group_devices[b]))
    self.model.AddHint(self.makespan, int(end.max(initial=0)))


def list_schedule(tasks: TaskGraph, group_devices: np.ndarray,
                  duration: np.ndarray, delay: np.ndarray,
                  slots: np.ndarray):
  """(start, end) int [T] of the tasks in index (topological) order, each
  at the earliest time its predecessors (plus delays across devices) and a
  free slot of its device allow."""
  num_tasks = tasks.num_tasks
  ready = np.zeros(num_tasks, np.int64)
  start = np.zeros(num_tasks, np.int64)
  end = np.zeros(num_tasks, np.int64)
  free_at = [[0] * int(k) for k in slots]
  order = np.argsort(tasks.edge_src, kind="stable")
  src, dst, dly = tasks.edge_src[order], tasks.edge_dst[order], delay[order]
  ptr = np.searchsorted(src, np.arange(num_tasks + 1))
  for t in range(num_tasks):
    d = int(group_devices[tasks.group[t]])
    slot = min(range(len(free_at[d])), key=free_at[d].__getitem__)
    start[t] = max(ready[t], free_at[d][slot])
    end[t] = start[t] + duration[t, d]
    free_at[d][slot] = end[t]
    for e in range(ptr[t], ptr[t + 1]):
      v = dst[e]
      cross = group_devices[tasks.group[v]] != d
      ready[v] = max(ready[v], end[t] + (dly[e] if cross else 0))
  return start, end


def _delays(tasks: TaskGraph, cluster: Cluster, unit: float) -> np.ndarray:
  """int [E]: slowest-link transfer delay of each edge, in time units."""
  lat, bw = cluster.link_latency, cluster.link_bandwidth
  off = ~np.eye(cluster.num_devices, dtype=bool)
  if not off.any():
    return np.zeros(len(tasks.edge_bytes), np.int64)
  seconds = np.max(lat[off][None, :]
                   + tasks.edge_bytes[:, None] / bw[off][None, :], axis=1)
  seconds = np.where(tasks.edge_bytes > 0, seconds, 0.0)
  return np.ceil(seconds / unit).astype(np.int64)


def build_model(tasks: TaskGraph, allowed: np.ndarray, memory: np.ndarray,
                cluster: Cluster, unit: float,
                hint: Optional[np.ndarray] = None) -> CpSatModel:
  """The CP-SAT model of the module docstring.

  Args:
    tasks: the task graph.
    allowed: bool [G, D].
    memory: float [G], memory estimate of each group (bytes).
    cluster: devices (memory, slots) and links.
    unit: seconds per model time unit.
    hint: optional int [G], a placement to hint with its list schedule
      (every variable); its makespan bounds the horizon (no better solution
      needs more), which keeps presolve's bound propagation short.
  """
  from ortools.sat.python import cp_model  # Lazy: heavy import.
  model = cp_model.CpModel()
  num_groups = allowed.shape[0]
  dur = np.ceil(np.where(np.isfinite(tasks.duration_s), tasks.duration_s, 0.0)
                / unit).astype(np.int64)
  delays = _delays(tasks, cluster, unit)
  slots = np.array([d.slots for d in cluster.devices])
  horizon = int(dur.max(axis=1).sum() + delays.sum() + 1)
  schedule = None
  if hint is not None:
    schedule = list_schedule(tasks, hint, dur, delays, slots)
    horizon = int(schedule[1].max(initial=0)) + 1
  assign = {(g, d): model.NewBoolVar(f"x{g}_{d}")
            for g in range(num_groups) for d in np.flatnonzero(allowed[g])}
  for g in range(num_groups):
    model.AddExactlyOne(assign[g, d] for d in np.flatnonzero(allowed[g]))
  for d, device in enumerate(cluster.devices):
    on_d = [(g, int(memory[g])) for g in range(num_groups) if allowed[g, d]]
    model.Add(sum(m * assign[g, d] for g, m in on_d)
              <= int(device.memory_bytes))
  head, tail = _path_bounds(tasks, np.where(allowed[tasks.group], dur,
                                             np.iinfo(np.int64).max).min(axis=1))
  horizon = max(horizon, int((head + tail).max(initial=0)))
  start = [model.NewIntVar(int(head[t]), horizon - int(tail[t]), f"s{t}")
           for t in range(tasks.num_tasks)]
  end = [model.NewIntVar(0, horizon, f"e{t}") for t in range(tasks.num_tasks)]
  _add_devices(model, tasks, dur, allowed, assign, start, end, cluster)
  cross = _add_precedences(model, tasks, delays, allowed, assign, start, end)
  makespan = model.NewIntVar(0, horizon, "makespan")
  model.AddMaxEquality(makespan, end)
  model.Minimize(makespan)
  built = CpSatModel(model, assign, start, end, cross, makespan, dur, delays,
                     unit)
  if schedule is not None:
    built.add_hint(hint, *schedule)
  return built


def _add_devices(model, tasks, dur, allowed, assign, start, end, cluster):
  """Each task's end on its group's device; one optional interval per
  (task, allowed device); per device NoOverlap (1 slot) or Cumulative."""
  intervals = [[] for _ in range(allowed.shape[1])]
  for t, g in enumerate(tasks.group):
    devices = np.flatnonzero(allowed[g])
    model.Add(end[t] == start[t] + sum(int(dur[t, d]) * assign[g, d]
                                       for d in devices))
    for d in devices:
      intervals[d].append(model.NewOptionalFixedSizeIntervalVar(
          start[t], int(dur[t, d]), assign[g, d], f"i{t}_{d}"))
  for d, device in enumerate(cluster.devices):
    if device.slots <= 1:
      model.AddNoOverlap(intervals[d])
    else:
      model.AddCumulative(intervals[d], [1] * len(intervals[d]), device.slots)


def _path_bounds(tasks: TaskGraph, shortest: np.ndarray):
  """(head, tail) int [T]: the longest path of shortest durations before
  each task starts, and from its start to the end (the task included); a
  task starts in [head, horizon - tail] in any schedule. Tight domains keep
  CP-SAT's presolve from tightening them a step at a time."""
  n = tasks.num_tasks
  head = np.zeros(n, np.int64)
  tail = shortest.astype(np.int64).copy()
  order = np.argsort(tasks.edge_src, kind="stable")
  src, dst = tasks.edge_src[order], tasks.edge_dst[order]
  for u, v in zip(src, dst):  # Sources in index (topological) order.
    head[v] = max(head[v], head[u] + shortest[u])
  for u, v in zip(src[::-1], dst[::-1]):
    tail[u] = max(tail[u], shortest[u] + tail[v])
  return head, tail


def _add_precedences(model, tasks, delays, allowed, assign, start, end):
  """start[v] >= end[u] (+ the delay when the groups' devices differ)."""
  cross = {}
  for u, v, delay in zip(tasks.edge_src, tasks.edge_dst, delays):
    a, b = int(tasks.group[u]), int(tasks.group[v])
    if a == b or delay == 0:
      model.Add(start[v] >= end[u])
      continue
    pair = (min(a, b), max(a, b))
    if pair not in cross:
      cross[pair] = model.NewBoolVar(f"c{pair[0]}_{pair[1]}")
      for d in range(allowed.shape[1]):
        xa = assign.get((a, d), 0)
        xb = assign.get((b, d), 0)
        model.Add(cross[pair] >= xa - xb)
    model.Add(start[v] >= end[u] + int(delay) * cross[pair])
  return cross
