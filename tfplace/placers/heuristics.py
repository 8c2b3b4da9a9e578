"""Simple baseline placers: single device, round robin, hash, critical path.

All of them work on colocation groups (`PlacementProblem.groups`), so a
group is never split, and move a group whose chosen device type has no
kernel for one of its ops to a device that has (the CPU first). The helpers
here (`fastest_device`, `fallback_device`) are shared by the other baseline
placers; memory is estimated by `tfplace.grouping.memory.MemoryBudget`.
"""

import hashlib
from typing import Optional, Sequence

import numpy as np

from tfplace.cost.cluster import Cluster
from tfplace.cost.op_costs import OpCosts
from tfplace.errors import PlacementError
from tfplace.graph import paths
from tfplace.grouping.group_graph import GroupGraph
from tfplace.grouping.memory import MemoryBudget
from tfplace.placement import Placement
from tfplace.placers.base import Placer
from tfplace.placers.problem import PlacementProblem
from tfplace.placers.registry import register_placer

# ---- shared helpers ---------------------------------------------------------


def fastest_device(cluster: Cluster, costs: OpCosts,
                   candidates: Sequence[int]) -> int:
  """The candidate device that runs the graph fastest.

  Compares total compute over the ops every candidate can run; ties go to
  the higher peak FLOP/s, then the lower index.

  Raises:
    PlacementError: no candidates.
  """
  candidates = list(candidates)
  if not candidates:
    raise PlacementError(f"cluster {cluster.name!r} has no candidate device")
  sub = np.asarray(costs.compute_s, dtype=np.float64)[:, candidates]
  common = np.all(np.isfinite(sub), axis=1)
  totals = (sub[common].sum(axis=0) if common.any()
            else np.zeros(len(candidates)))
  keys = [(totals[k], -cluster.devices[d].peak_flops, d)
          for k, d in enumerate(candidates)]
  return min(keys)[2]


def fallback_device(groups: GroupGraph, cluster: Cluster, group: int,
                    preferred: int) -> int:
  """`preferred` if it can run every op of `group`, else the first CPU that
  can, else the first device that can.

  Raises:
    PlacementError: no device type has kernels for all the group's ops.
  """
  allowed = groups.allowed[group]
  if allowed[preferred]:
    return preferred
  for d in cluster.devices_of_type("CPU") + list(range(cluster.num_devices)):
    if allowed[d]:
      return d
  raise PlacementError(
      f"colocation group {group} (ops {groups.members[group][:4].tolist()}...) "
      "mixes ops whose kernels exist on no common device type of cluster "
      f"{cluster.name!r}")


def _single_device(problem: PlacementProblem, device: int,
                   name: str) -> Placement:
  groups = problem.groups
  devices = [fallback_device(groups, problem.cluster, g, device)
             for g in range(groups.num_groups)]
  return problem.placement(devices, name)


def _first_of_type(cluster: Cluster, device_type: str) -> int:
  ids = cluster.devices_of_type(device_type)
  if not ids:
    raise PlacementError(
        f"cluster {cluster.name!r} has no {device_type} device")
  return ids[0]


# ---- placers ----------------------------------------------------------------


@register_placer("single_cpu")
class SingleCpuPlacer(Placer):
  """Everything on the first CPU (the "Single-CPU" baseline of Mirhoseini
  et al., ICML 2017). Ops without a CPU kernel go to a device that has one.
  """

  uses_seed = False

  def place(self, problem: PlacementProblem,
            seed: Optional[int] = None) -> Placement:
    cpu = _first_of_type(problem.cluster, "CPU")
    return _single_device(problem, cpu, self.name)


@register_placer("single_gpu")
class SingleGpuPlacer(Placer):
  """Everything on the fastest GPU, ops without a GPU kernel on the CPU
  (the "Single-GPU" baseline of Mirhoseini et al., ICML 2017). It ignores
  memory: a graph too big for one GPU is reported infeasible by the
  simulator.
  """

  uses_seed = False

  def place(self, problem: PlacementProblem,
            seed: Optional[int] = None) -> Placement:
    cluster = problem.cluster
    gpus = cluster.devices_of_type("GPU")
    if not gpus:
      raise PlacementError(f"cluster {cluster.name!r} has no GPU; use "
                           "single_cpu")
    gpu = fastest_device(cluster, problem.costs, gpus)
    return _single_device(problem, gpu, self.name)


@register_placer("round_robin")
class RoundRobinPlacer(Placer):
  """Colocation groups dealt over all devices in turn, in topological order.

  A group that has no kernel or no memory left on its turn's device goes to
  the next device that can take it.
  """

  uses_seed = False

  def place(self, problem: PlacementProblem,
            seed: Optional[int] = None) -> Placement:
    groups, cluster = problem.groups, problem.cluster
    budget = MemoryBudget(groups, cluster)
    n = cluster.num_devices
    devices = np.zeros(groups.num_groups, dtype=np.int32)
    for turn, g in enumerate(groups.topo_order()):
      order = [(turn + k) % n for k in range(n)]
      d = budget.first_fit(g, order)
      if d is None:
        d = fallback_device(groups, cluster, g, order[0])
      budget.add(g, d)
      devices[g] = d
    return problem.placement(devices, self.name)


def _unit_hash(text: str, seed: Optional[int]) -> float:
  digest = hashlib.blake2b(f"{seed or 0}\0{text}".encode(), digest_size=8)
  return int.from_bytes(digest.digest(), "little") / 2.0**64


@register_placer("hash")
class HashPlacer(Placer):
  """Hash partitioning (Mayer et al., The TensorFlow Partitioning and
  Scheduling Problem, 2017): each colocation group goes to a device drawn by
  a hash of its first op's name, with probability proportional to the
  device's capacity (peak FLOP/s). Deterministic for a given seed.
  """

  def place(self, problem: PlacementProblem,
            seed: Optional[int] = None) -> Placement:
    graph, groups, cluster = problem.graph, problem.groups, problem.cluster
    budget = MemoryBudget(groups, cluster)
    capacity = np.array([d.peak_flops for d in cluster.devices])
    devices = np.zeros(groups.num_groups, dtype=np.int32)
    for g in groups.topo_order():
      weights = np.where(groups.allowed[g], capacity, 0.0)
      if weights.sum() <= 0:
        devices[g] = fallback_device(groups, cluster, g, 0)
        continue
      cumulative = np.cumsum(weights) / weights.sum()
      name = graph.ops[groups.members[g][0]].name
      pick = int(np.searchsorted(cumulative, _unit_hash(name, seed), "right"))
      pick = min(pick, cluster.num_devices - 1)
      order = [(pick + k) % cluster.num_devices
               for k in range(cluster.num_devices)]
      d = budget.first_fit(g, order)
      d = fallback_device(groups, cluster, g, pick) if d is None else d
      budget.add(g, d)
      devices[g] = d
    return problem.placement(devices, self.name)


@register_placer("critical_path")
class CriticalPathPlacer(Placer):
  """Critical-path placement (Mayer et al., The TensorFlow Partitioning and
  Scheduling Problem, 2017): the colocation groups of the path with the
  longest computation time go to the fastest device; the other groups, in
  topological order, each go to the device where its compute would finish
  the device's load earliest, keeping the load balanced (kernels and the
  memory estimate respected where possible).
  """

  uses_seed = False

  def place(self, problem: PlacementProblem,
            seed: Optional[int] = None) -> Placement:
    graph, groups, cluster = problem.graph, problem.groups, problem.cluster
    costs = problem.costs
    budget = MemoryBudget(groups, cluster)
    compute = np.asarray(costs.compute_s, dtype=np.float64)
    fastest = fastest_device(cluster, costs, range(cluster.num_devices))
    finite = np.where(np.isfinite(compute), compute, np.inf).min(axis=1)
    op_time = np.where(np.isfinite(compute[:, fastest]), compute[:, fastest],
                       np.where(np.isfinite(finite), finite, 0.0))
    path, _ = paths.critical_path(graph, op_time)
    path_groups = set(groups.group_of[path].tolist())
    devices = np.full(groups.num_groups, -1, dtype=np.int32)
    load = np.zeros(cluster.num_devices)
    for g in groups.topo_order():
      if g in path_groups and budget.first_fit(g, [fastest]) is not None:
        self._assign(groups, budget, load, devices, g, fastest)
    for g in groups.topo_order():
      if devices[g] >= 0:
        continue
      finish = load + groups.compute_s[g]
      order = np.argsort(finish, kind="stable")
      d = budget.first_fit(g, order)
      d = fallback_device(groups, cluster, g, int(order[0])) if d is None else d
      self._assign(groups, budget, load, devices, g, d)
    return problem.placement(devices, self.name)

  @staticmethod
  def _assign(groups, budget, load, devices, g, d):
    budget.add(g, d)
    load[d] += groups.compute_s[g, d]
    devices[g] = d
