"""The group-level view of a graph: ops merged into groups, costs summed.

Every placer works on groups (by default the colocation groups, which must be
placed whole) rather than on ops. A `GroupGraph` holds, per group, its member
ops, its compute time on every device, the devices it may use, its parameter
and output bytes, the edges between groups with the bytes they carry, and
the features a learned placer reads (op-type counts, bytes in and out,
topological rank). `expand` turns a device per group (or a batch of them)
back into a device per op.

The group graph may have cycles: a variable's colocation group holds both
its read and its update, so ops between them point back into the group.
"""

import dataclasses
from typing import Optional, Sequence, Tuple

import numpy as np

from tfplace.cost.op_costs import OpCosts
from tfplace.errors import PlacementError
from tfplace.graph.op_graph import OpGraph


@dataclasses.dataclass(frozen=True, eq=False)
class GroupGraph:
  """A graph of op groups.

  Attributes:
    group_of: int32 [M], op -> group id (0..G-1).
    members: per group, the int32 array of its op ids (ascending).
    compute_s: float64 [G, D], summed compute seconds of the members on each
      device (inf where some member has no kernel for the device type).
    allowed: bool [G, D], the device can run every member op (finite cost).
    param_bytes: int64 [G], summed persistent bytes.
    output_bytes: int64 [G], summed output (activation) bytes.
    edge_src: int32 [E], source group of each group edge.
    edge_dst: int32 [E], destination group of each group edge.
    edge_bytes: int64 [E], bytes carried (each tensor counted once per
      destination group; control edges carry 0 bytes).
    topo_rank: int32 [G], position of each group's first op in the op
      graph's topological order (ranks groups even when the group graph has
      cycles).
  """
  group_of: np.ndarray
  members: Tuple[np.ndarray, ...]
  compute_s: np.ndarray
  allowed: np.ndarray
  param_bytes: np.ndarray
  output_bytes: np.ndarray
  edge_src: np.ndarray
  edge_dst: np.ndarray
  edge_bytes: np.ndarray
  topo_rank: np.ndarray

  @property
  def num_groups(self) -> int:
    return len(self.members)

  @property
  def num_ops(self) -> int:
    return len(self.group_of)

  @property
  def num_devices(self) -> int:
    return self.compute_s.shape[1]

  @property
  def memory_bytes(self) -> np.ndarray:
    """int64 [G]: memory estimate, parameters plus activations.

    Activations are counted whole: a training step keeps the forward outputs
    until the backward pass consumes them, so this is a safe upper bound.
    """
    return self.param_bytes + self.output_bytes

  def topo_order(self) -> np.ndarray:
    """Group ids ordered by `topo_rank` (ties by group id)."""
    return np.argsort(self.topo_rank, kind="stable").astype(np.int32)

  def expand(self, group_device_ids) -> np.ndarray:
    """Device id per op from a device id per group.

    Args:
      group_device_ids: int [G], or a batch [B, G].

    Returns:
      int32 [M], or [B, M] for a batch.
    """
    ids = np.asarray(group_device_ids)
    if ids.ndim not in (1, 2) or ids.shape[-1] != self.num_groups:
      raise PlacementError(f"expected {self.num_groups} group device ids "
                           f"(or a batch of them), got shape {ids.shape}")
    return ids.astype(np.int32)[..., self.group_of]

  # ---- features of each group (what a learned placer sees) ---------------

  @property
  def in_bytes(self) -> np.ndarray:
    """float64 [G]: bytes the group receives from other groups."""
    return np.bincount(self.edge_dst, weights=self.edge_bytes,
                       minlength=self.num_groups)

  @property
  def out_bytes(self) -> np.ndarray:
    """float64 [G]: bytes the group sends to other groups."""
    return np.bincount(self.edge_src, weights=self.edge_bytes,
                       minlength=self.num_groups)

  def op_type_counts(self, op_types: Sequence[str],
                     vocabulary: Sequence[str]) -> np.ndarray:
    """float32 [G, V+1]: how many member ops have each vocabulary type.

    Args:
      op_types: the type of every op (`OpGraph.op_types`).
      vocabulary: the op types to count; the last column counts the others.
    """
    column = {t: k for k, t in enumerate(vocabulary)}
    other = len(vocabulary)
    op_column = np.array([column.get(t, other) for t in op_types],
                         dtype=np.int64)
    counts = np.zeros((self.num_groups, other + 1), dtype=np.float32)
    np.add.at(counts, (self.group_of, op_column), 1.0)
    return counts

  def undirected_adjacency(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Symmetric CSR adjacency (ptr [G+1], nbr [2E'], bytes [2E']).

    Both directions of a pair of groups are merged into one undirected edge
    whose weight is the sum of the bytes of both directions.
    """
    g = self.num_groups
    lo = np.minimum(self.edge_src, self.edge_dst).astype(np.int64)
    hi = np.maximum(self.edge_src, self.edge_dst).astype(np.int64)
    keys, inverse = np.unique(lo * g + hi, return_inverse=True)
    weight = np.bincount(inverse, weights=self.edge_bytes,
                         minlength=len(keys)).astype(np.int64)
    a, b = keys // g, keys % g
    src = np.concatenate([a, b])
    dst = np.concatenate([b, a])
    w = np.concatenate([weight, weight])
    order = np.lexsort((dst, src))
    ptr = np.zeros(g + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=g), out=ptr[1:])
    return ptr, dst[order].astype(np.int64), w[order]


def build_group_graph(graph: OpGraph, costs: OpCosts,
                      group_of: Optional[np.ndarray] = None) -> GroupGraph:
  """Builds the group graph of `graph`.

  Args:
    graph: the op graph.
    costs: per-op costs on the cluster's devices.
    group_of: optional int array [M], op -> group; default the colocation
      groups. Any labels; they are renumbered in order of first appearance.
      Each group should contain whole colocation groups.

  Returns:
    The `GroupGraph`.
  """
  if costs.num_ops != graph.num_ops:
    raise PlacementError(f"costs are for {costs.num_ops} ops, the graph has "
                         f"{graph.num_ops}")
  if group_of is None:
    labels = graph.group_of
  else:
    labels = np.asarray(group_of)
    if labels.shape != (graph.num_ops,):
      raise PlacementError(f"group_of must have shape ({graph.num_ops},), got "
                           f"{labels.shape}")
  _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
  rank = np.empty(len(first), dtype=np.int32)
  rank[np.argsort(first, kind="stable")] = np.arange(len(first), dtype=np.int32)
  gof = rank[inverse].astype(np.int32)
  num_groups = len(first)
  members = tuple(np.flatnonzero(gof == k).astype(np.int32)
                  for k in range(num_groups))
  compute = np.zeros((num_groups, costs.num_devices))
  np.add.at(compute, gof, np.asarray(costs.compute_s, dtype=np.float64))
  src, dst, sbytes = _group_edges(graph, gof, num_groups)
  topo_rank = np.full(num_groups, graph.num_ops, dtype=np.int32)
  order = graph.topo_order
  np.minimum.at(topo_rank, gof[order], np.arange(len(order), dtype=np.int32))
  return GroupGraph(
      group_of=gof, members=members, compute_s=compute,
      allowed=np.isfinite(compute),
      param_bytes=np.bincount(gof, weights=costs.param_bytes,
                              minlength=num_groups).astype(np.int64),
      output_bytes=np.bincount(gof, weights=costs.output_bytes,
                               minlength=num_groups).astype(np.int64),
      edge_src=src, edge_dst=dst, edge_bytes=sbytes, topo_rank=topo_rank)


def _group_edges(graph: OpGraph, gof: np.ndarray, num_groups: int):
  """Group edges: self-loops dropped, parallel edges summed.

  A tensor read by several ops of one destination group is counted once
  (it crosses once); control edges add an edge with 0 bytes.
  """
  src, dst, out, nbytes = graph.edge_arrays
  if len(src) == 0:
    empty = np.zeros(0, dtype=np.int32)
    return empty, empty, np.zeros(0, dtype=np.int64)
  gs, gd = gof[src].astype(np.int64), gof[dst].astype(np.int64)
  keep = gs != gd
  gs, gd, src = gs[keep], gd[keep], src[keep]
  out, nbytes = out[keep], nbytes[keep]
  # One transfer per (tensor, destination group); control edges keep 0 bytes.
  tensor_key = np.stack([src.astype(np.int64), out.astype(np.int64), gd],
                        axis=1)
  _, uniq = np.unique(tensor_key, axis=0, return_index=True)
  once = np.zeros(len(gs), dtype=np.int64)
  once[uniq] = np.where(out[uniq] < 0, 0, nbytes[uniq])
  keys, inverse = np.unique(gs * num_groups + gd, return_inverse=True)
  total = np.bincount(inverse, weights=once, minlength=len(keys))
  return ((keys // num_groups).astype(np.int32),
          (keys % num_groups).astype(np.int32), total.astype(np.int64))
