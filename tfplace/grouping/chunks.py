"""The units a ColocRL policy places: coarse groups of colocation groups.

ColocRL (Mirhoseini et al., ICML 2017) placed a few hundred groups (188 for
RNNLM, 280 for NMT, 83 for Inception-V3), not tens of thousands of ops: a
seq2seq model cannot be unrolled much further. tfplace's units are built in
two steps:

  1. chunks: the colocation groups in topological order, cut into
     `num_chunks` runs of about equal weight (fastest compute time, plus an
     equal share per group so that free groups spread too);
  2. split by the start placement: each chunk is split by the device the
     start placement (the best heuristic) gives its members, so that the
     start placement is exactly one action of the policy, and a unit is
     "the part of chunk c on device d".
"""

from typing import Optional, Tuple

import numpy as np

from tfplace.cost.op_costs import OpCosts
from tfplace.errors import PlacementError
from tfplace.graph.op_graph import OpGraph
from tfplace.grouping.group_graph import GroupGraph, build_group_graph


def renumber(labels: np.ndarray, order: Optional[np.ndarray] = None
             ) -> np.ndarray:
  """Labels renumbered 0..K-1 by first appearance along `order`."""
  labels = np.asarray(labels)
  order = np.arange(len(labels)) if order is None else np.asarray(order)
  _, first, inverse = np.unique(labels[order], return_index=True,
                                return_inverse=True)
  rank = np.empty(len(first), dtype=np.int32)
  rank[np.argsort(first, kind="stable")] = np.arange(len(first),
                                                     dtype=np.int32)
  out = np.empty(len(labels), dtype=np.int32)
  out[order] = rank[inverse]
  return out


def topo_chunks(groups: GroupGraph, num_chunks: int) -> np.ndarray:
  """int32 [G]: chunk of each group, `num_chunks` topological runs of about
  equal weight (fastest compute, plus 1/G of the total per group)."""
  if num_chunks < 1:
    raise PlacementError(f"num_chunks must be >= 1, got {num_chunks}")
  order = groups.topo_order()
  compute = np.where(np.isfinite(groups.compute_s), groups.compute_s, np.inf)
  fastest = compute.min(axis=1)
  fastest = np.where(np.isfinite(fastest), fastest, 0.0)
  total = fastest.sum()
  weight = fastest + (total if total > 0 else 1.0) / groups.num_groups
  cumulative = np.cumsum(weight[order]) - weight[order] / 2
  chunk = np.empty(groups.num_groups, dtype=np.int32)
  chunk[order] = np.minimum(
      (cumulative / cumulative[-1] * num_chunks).astype(np.int32),
      num_chunks - 1)
  return renumber(chunk, order)


def split_by_devices(labels: np.ndarray, devices: np.ndarray,
                     order: Optional[np.ndarray] = None) -> np.ndarray:
  """int32 [G]: one unit per (label, device) pair, numbered along `order`."""
  labels = np.asarray(labels, dtype=np.int64)
  devices = np.asarray(devices, dtype=np.int64)
  return renumber(labels * (int(devices.max()) + 1) + devices, order)


def units(groups: GroupGraph, start_devices: np.ndarray,
          num_chunks: int) -> np.ndarray:
  """int32 [G]: the unit of each colocation group (see the module doc)."""
  if len(start_devices) != groups.num_groups:
    raise PlacementError(f"start placement has {len(start_devices)} groups, "
                         f"the graph has {groups.num_groups}")
  chunks = topo_chunks(groups, min(num_chunks, groups.num_groups))
  return split_by_devices(chunks, start_devices, groups.topo_order())


def unit_group_graph(graph: OpGraph, costs: OpCosts, groups: GroupGraph,
                     unit_of: np.ndarray) -> Tuple[GroupGraph, np.ndarray]:
  """The group graph of the units, and `unit_of` [G] renumbered as it
  numbers them (`build_group_graph` numbers groups by their first op, not
  by `unit_of`'s ids), so that unit u of an action is row u of the unit
  graph's features."""
  unit_graph = build_group_graph(graph, costs, np.asarray(unit_of)[
      groups.group_of])
  first = np.array([members[0] for members in groups.members], np.int64)
  return unit_graph, unit_graph.group_of[first].astype(np.int32)
