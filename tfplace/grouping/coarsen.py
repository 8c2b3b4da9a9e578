"""Coarsening: the colocation groups merged into about K groups.

Search placers (and the learned placers) search over K groups instead of
thousands of colocation groups; a colocation group is never split. Two
methods, both balancing compute so that no coarse group dominates a device:

  * "metis": METIS k-way partitioning of the colocation-group graph, vertex
    weight = compute time, edge weight = bytes between the groups (as the
    METIS min-cut baseline, with K parts instead of one per device). Parts
    cut few bytes but need not be convex (a part may be left and re-entered).
  * "heavy_edge": greedy heavy-edge contraction along the data flow: edges
    are taken in order of bytes (heaviest first) and their two ends merged
    while the merged compute stays under a cap (total / K); then groups
    adjacent in topological order (pieces no edge joins); the cap is raised
    when nothing fits. As the coarsening phase of multilevel partitioners
    (Hendrickson & Leland 1995; Karypis & Kumar 1998). Producer-consumer
    chains stay together, so coarse groups follow the critical path.

Groups are only merged with groups that can run on the same devices (same
`allowed` row): a CPU-only group never drags GPU work onto the CPU. Each
class of groups with the same allowed devices gets a share of K in
proportion to its compute (at least one coarse group; one in all when the
class can run on a single device, since its groups go there anyway).

    labels = coarsen_to_k(graph, costs, num_groups=200, method="metis")
    coarse = build_group_graph(graph, costs, group_of=labels)
"""

from typing import Dict, List, Optional

import numpy as np

from tfplace.cost.op_costs import OpCosts
from tfplace.errors import PlacementError
from tfplace.graph.op_graph import OpGraph
from tfplace.grouping import partition
from tfplace.grouping import group_graph
from tfplace.grouping.group_graph import GroupGraph

METHODS = ("metis", "heavy_edge")


def coarsen_to_k(graph: OpGraph, costs: OpCosts, num_groups: int,
                 method: str = "metis", seed: Optional[int] = 0) -> np.ndarray:
  """Labels that merge the colocation groups of `graph` into ~`num_groups`.

  Args:
    graph: the op graph.
    costs: per-op costs on the cluster (compute balances the groups).
    num_groups: K, the number of coarse groups wanted (the result has K or
      fewer, more only when there are more classes of allowed devices than
      K; the colocation groups themselves when there are at most K).
    method: "metis" or "heavy_edge" (see the module docstring).
    seed: METIS's seed.

  Returns:
    int32 [M]: op -> coarse group (0..K'-1), whole colocation groups.

  Raises:
    PlacementError: unknown method or num_groups < 1.
  """
  if method not in METHODS:
    raise PlacementError(f"unknown coarsening method {method!r}; choose one "
                         f"of {list(METHODS)}")
  if num_groups < 1:
    raise PlacementError(f"coarsen to at least 1 group, got {num_groups}")
  groups = group_graph.build_group_graph(graph, costs)
  if groups.num_groups <= num_groups:
    return groups.group_of.copy()
  coarse = np.full(groups.num_groups, -1, dtype=np.int64)
  classes = _allowed_classes(groups)
  for members, share in zip(classes, _shares(groups, classes, num_groups)):
    if share <= 1:
      parts = np.zeros(len(members), dtype=np.int64)
    elif method == "metis":
      parts = _metis(groups, members, share, seed)
    else:
      parts = _heavy_edge(groups, members, share)
    coarse[members] = coarse.max() + 1 + _dense(parts)
  return coarse[groups.group_of].astype(np.int32)


def _allowed_classes(groups: GroupGraph) -> List[np.ndarray]:
  """Group ids by allowed-device row, largest class first."""
  rows: Dict[bytes, List[int]] = {}
  for g, row in enumerate(groups.allowed):
    rows.setdefault(row.tobytes(), []).append(g)
  classes = [np.array(ids, dtype=np.int64) for ids in rows.values()]
  return sorted(classes, key=lambda ids: (-len(ids), ids[0]))


def _weights(groups: GroupGraph, members: np.ndarray) -> np.ndarray:
  """Compute seconds of each group, averaged over its allowed devices."""
  allowed = groups.allowed[members[0]]
  return groups.compute_s[members][:, allowed].mean(axis=1)


def _shares(groups: GroupGraph, classes, num_groups: int) -> List[int]:
  """Coarse groups per class: 1 for single-device classes, the rest of K in
  proportion to compute (at least 1, at most the class's size)."""
  single = [groups.allowed[c[0]].sum() <= 1 for c in classes]
  left = max(num_groups - sum(single), 1)
  work = np.array([0.0 if s else _weights(groups, c).sum() + 1e-12
                   for c, s in zip(classes, single)])
  total = work.sum()
  shares = []
  for c, s, w in zip(classes, single, work):
    k = 1 if s or total <= 0 else int(round(left * w / total))
    shares.append(int(min(max(k, 1), len(c))))
  return shares


def _dense(parts: np.ndarray) -> np.ndarray:
  """Parts renumbered 0..P-1 in order of first appearance."""
  _, first, inverse = np.unique(parts, return_index=True, return_inverse=True)
  rank = np.empty(len(first), dtype=np.int64)
  rank[np.argsort(first, kind="stable")] = np.arange(len(first))
  return rank[inverse]


def _metis(groups: GroupGraph, members: np.ndarray, k: int,
           seed: Optional[int]) -> np.ndarray:
  """METIS parts of `members`. A group heavier than a part's share (total /
  k) weighs as one share, so that balanced parts exist and METIS does not
  leave parts empty."""
  ptr, nbr, nbytes = partition.induced_csr(groups, members)
  weight = _weights(groups, members)
  weight = np.minimum(weight, weight.sum() / k)
  return partition.metis_parts(ptr, nbr, partition.int_weights(weight),
                               partition.int_weights(nbytes), k, seed)


def _heavy_edge(groups: GroupGraph, members: np.ndarray, k: int) -> np.ndarray:
  """Greedy heavy-edge contraction of `members` down to k groups."""
  n = len(members)
  local = np.full(groups.num_groups, -1, dtype=np.int64)
  local[members] = np.arange(n)
  src, dst = local[groups.edge_src], local[groups.edge_dst]
  inside = (src >= 0) & (dst >= 0)
  src, dst, nbytes = src[inside], dst[inside], groups.edge_bytes[inside]
  order = np.lexsort((np.minimum(groups.topo_rank[members][src],
                                 groups.topo_rank[members][dst]), -nbytes))
  weight = _weights(groups, members).astype(np.float64)
  parent = np.arange(n)
  size = weight.copy()
  count = n
  cap = weight.sum() / k
  # Fallback pairs: neighbours in topological order (pieces no edge joins).
  topo = np.argsort(groups.topo_rank[members], kind="stable")
  while count > k:
    before = count
    count = _contract(parent, size, src[order], dst[order], cap, count, k)
    count = _contract(parent, size, topo[:-1], topo[1:], cap, count, k)
    if count == before:
      cap *= 1.5
  return np.array([_find(parent, i) for i in range(n)])


def _find(parent: np.ndarray, i: int) -> int:
  while parent[i] != i:
    parent[i] = parent[parent[i]]
    i = parent[i]
  return int(i)


def _contract(parent, size, src, dst, cap, count, k) -> int:
  """One pass over the edges; returns the number of groups left."""
  for a, b in zip(src, dst):
    if count <= k:
      break
    ra, rb = _find(parent, a), _find(parent, b)
    if ra != rb and size[ra] + size[rb] <= cap:
      parent[max(ra, rb)] = min(ra, rb)
      size[min(ra, rb)] += size[max(ra, rb)]
      count -= 1
  return count
