"""What Placeto's graph network sees of a group graph, before any placement.

Placeto (Addanki et al., NeurIPS 2019) embeds the graph anew at every step of
an episode, from features that mix what never changes (a group's compute
cost, its output bytes, its memory) with what the placement changes (its
device, whether it was visited, when it starts). This module holds the part
that never changes, computed once per search:

  * `features`: per group, log-scaled to [0, 1]: compute seconds on each
    device, output bytes, memory (parameter + output bytes, the
    `MemoryBudget` estimate), bytes in and out, and topological position;
  * the DAG edges with their bytes, for message passing in both directions;
  * `descendants` [G, G]: which groups each group reaches. A group graph can
    have cycles (a variable's group both feeds and is updated by the step):
    groups of one strongly connected component reach each other, so they are
    both ancestors and descendants of each other. Ancestors are the
    transpose; parallel peers are the groups that are neither (nor itself);
  * `order`: the order an episode visits the groups (topological rank);
  * `compute_s` and `reference_s`, for the per-device head features (load of
    the parallel peers on each device) in units of the start step time.
"""

import dataclasses
from typing import Tuple

import numpy as np
from scipy.sparse import csgraph, csr_matrix

from tfplace.errors import PlacementError
from tfplace.graph.op_graph import OpGraph
from tfplace.grouping.group_graph import GroupGraph
from tfplace.rl import features as features_lib

STATIC_COLUMNS = ("ops", "output_bytes", "param_bytes", "in_bytes",
                  "out_bytes", "position")


@dataclasses.dataclass(frozen=True)
class ProgressiveGraph:
  """The constant part of Placeto's view of one group graph.

  Attributes:
    features: float32 [G, F] static per-group features in [0, 1].
    feature_names: the F column names.
    edge_src: int32 [E], DAG edge sources (no self-loops).
    edge_dst: int32 [E], their destinations.
    edge_bytes: float64 [E], bytes each edge carries.
    descendants: bool [G, G], [g, h] when g reaches h (g != h, or g on a
      cycle).
    order: int32 [G], the groups in the order an episode visits them.
    compute_s: float64 [G, D], compute seconds (inf: no kernel).
    reference_s: the step time features are measured against (> 0).
  """
  features: np.ndarray
  feature_names: Tuple[str, ...]
  edge_src: np.ndarray
  edge_dst: np.ndarray
  edge_bytes: np.ndarray
  descendants: np.ndarray
  order: np.ndarray
  compute_s: np.ndarray
  reference_s: float

  @property
  def num_groups(self) -> int:
    return self.features.shape[0]

  @property
  def num_devices(self) -> int:
    return self.compute_s.shape[1]

  @property
  def ancestors(self) -> np.ndarray:
    """bool [G, G]: [g, h] when h reaches g."""
    return self.descendants.T

  @property
  def parallel(self) -> np.ndarray:
    """bool [G, G]: [g, h] when neither reaches the other (and g != h)."""
    related = self.descendants | self.descendants.T
    np.fill_diagonal(related, True)
    return ~related

  @property
  def position(self) -> np.ndarray:
    """int32 [G]: each group's index in `order` (its visit step)."""
    rank = np.empty(self.num_groups, np.int32)
    rank[self.order] = np.arange(self.num_groups, dtype=np.int32)
    return rank


def reachability(num_nodes: int, src: np.ndarray, dst: np.ndarray
                 ) -> np.ndarray:
  """bool [N, N]: [a, b] when a path of edges src -> dst leads from a to b.

  Strongly connected components are condensed first; the closure is then
  one pass over the condensation in reverse topological order. A node on a
  cycle reaches itself.
  """
  src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
  adjacency = csr_matrix((np.ones(len(src), np.int8), (src, dst)),
                         shape=(num_nodes, num_nodes))
  count, label = csgraph.connected_components(adjacency, directed=True,
                                              connection="strong")
  c_src, c_dst = label[src], label[dst]
  cross = c_src != c_dst
  size = np.bincount(label, minlength=count)
  cyclic = size > 1
  cyclic[c_src[~cross]] = True  # Self-loops.
  reach = np.zeros((count, count), bool)
  successors = [[] for _ in range(count)]
  for a, b in set(zip(c_src[cross].tolist(), c_dst[cross].tolist())):
    successors[a].append(b)
  for c in _reverse_topological(count, successors):
    for s in successors[c]:
      reach[c] |= reach[s]
      reach[c, s] = True
  reach[np.arange(count), np.arange(count)] = cyclic
  return reach[label][:, label]


def _reverse_topological(count: int, successors) -> list:
  """Condensation nodes, every node after all its successors."""
  indegree = np.zeros(count, np.int64)
  for succ in successors:
    for s in succ:
      indegree[s] += 1
  ready = [c for c in range(count) if indegree[c] == 0]
  order = []
  while ready:
    c = ready.pop()
    order.append(c)
    for s in successors[c]:
      indegree[s] -= 1
      if indegree[s] == 0:
        ready.append(s)
  return order[::-1]


def build_progressive_graph(graph: OpGraph, groups: GroupGraph,
                            reference_s: float) -> ProgressiveGraph:
  """Placeto's constant view of `groups` (a group graph of `graph`).

  Args:
    graph: the op graph.
    groups: its group graph (colocation groups or coarser units).
    reference_s: the start placement's step time (features are scaled by
      it), finite and > 0.

  Raises:
    PlacementError: `reference_s` is not finite and positive.
  """
  if not (np.isfinite(reference_s) and reference_s > 0):
    raise PlacementError(f"reference step time must be positive and finite, "
                         f"got {reference_s}")
  base = features_lib.group_features(graph, groups)
  columns = [base.names.index(name) for name in STATIC_COLUMNS]
  compute = [i for i, name in enumerate(base.names)
             if name.startswith("compute:")]
  memory = np.log1p(groups.memory_bytes.astype(np.float64))[:, None]
  memory /= max(float(memory.max()), 1e-12)
  values = np.concatenate([base.values[:, compute], base.values[:, columns],
                           memory], axis=1).astype(np.float32)
  names = tuple(base.names[i] for i in compute) + STATIC_COLUMNS + (
      "memory",)
  return ProgressiveGraph(
      features=values, feature_names=names,
      edge_src=groups.edge_src.astype(np.int32),
      edge_dst=groups.edge_dst.astype(np.int32),
      edge_bytes=groups.edge_bytes.astype(np.float64),
      descendants=reachability(groups.num_groups, groups.edge_src,
                               groups.edge_dst),
      order=groups.topo_order(), compute_s=groups.compute_s.astype(np.float64),
      reference_s=float(reference_s))
