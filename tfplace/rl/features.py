"""What a learned placer sees of a group: a fixed-size feature vector.

ColocRL (Mirhoseini et al., ICML 2017) embeds each op by its type, its output
shape and its adjacency; the hierarchical planner (Mirhoseini et al., ICLR
2018) does the same per op for its grouper. tfplace's unit is a group (a
colocation group or a coarser group of them), so each feature is summed or
averaged over the group's members:

  * op types: a histogram over the graph's most frequent op types (plus
    "other"), log-scaled;
  * sizes: number of ops, output bytes, parameter bytes (log-scaled);
  * compute: seconds on each device (log-scaled relative to the slowest
    finite time; 0 where the device has no kernel);
  * adjacency: bytes in and out, in- and out-degree (log-scaled), the mean
    topological position of the predecessors and of the successors;
  * position: the topological rank in [0, 1] and a few sinusoids of it.

Every column is scaled to roughly [-1, 1] so that no normalization is needed
in the networks. The features are the same in every episode: the networks
take them when they are built (see `tfplace.rl.networks`).
"""

import dataclasses
from typing import Optional, Sequence, Tuple

import numpy as np

from tfplace.graph.op_graph import OpGraph
from tfplace.grouping.group_graph import GroupGraph

DEFAULT_VOCABULARY_SIZE = 24
NUM_POSITION_FREQUENCIES = 4

# One vocabulary for every graph, for a policy that moves between graphs
# (GDP): the compute-heavy and the most frequent op types of TF training
# steps (tfplace's benchmark models); the rest count as "other".
SHARED_VOCABULARY = (
    "MatMul", "BatchMatMulV2", "Conv2D", "Conv2DBackpropInput",
    "Conv2DBackpropFilter", "FusedBatchNormV3", "FusedBatchNormGradV3",
    "Relu", "ReluGrad", "Tanh", "TanhGrad", "Sigmoid", "SigmoidGrad",
    "Softmax", "AddV2", "Mul", "Sub", "AddN", "Sum", "ConcatV2", "Reshape",
    "Identity", "ReadVariableOp", "Const")


@dataclasses.dataclass(frozen=True)
class GroupFeatures:
  """Per-group features of one group graph on one cluster.

  Attributes:
    values: float32 [G, F], one row per group (group id order).
    names: the F column names.
    vocabulary: the op types of the histogram columns ("other" last).
  """
  values: np.ndarray
  names: Tuple[str, ...]
  vocabulary: Tuple[str, ...]

  @property
  def num_groups(self) -> int:
    return self.values.shape[0]

  @property
  def num_features(self) -> int:
    return self.values.shape[1]


def op_type_vocabulary(graph: OpGraph,
                       size: int = DEFAULT_VOCABULARY_SIZE) -> Tuple[str, ...]:
  """The `size` most frequent op types of `graph` (ties by name)."""
  types, counts = np.unique(np.asarray(graph.op_types), return_counts=True)
  order = sorted(range(len(types)), key=lambda i: (-counts[i], types[i]))
  return tuple(str(types[i]) for i in order[:size])


def _log_scaled(x: np.ndarray) -> np.ndarray:
  """log1p(x) divided by its maximum (columns of zeros stay zero)."""
  y = np.log1p(np.maximum(np.asarray(x, dtype=np.float64), 0.0))
  top = y.max(axis=0, keepdims=True) if y.size else 1.0
  return y / np.where(top > 0, top, 1.0)


def _compute_columns(compute_s: np.ndarray) -> np.ndarray:
  """log compute per device relative to the slowest finite group time."""
  finite = np.isfinite(compute_s)
  safe = np.where(finite, compute_s, 0.0)
  top = safe.max() if safe.size else 0.0
  scaled = np.log1p(safe / top * 1e3) / np.log1p(1e3) if top > 0 else safe
  return np.where(finite, scaled, 0.0)


def _adjacency_columns(groups: GroupGraph, position: np.ndarray) -> np.ndarray:
  """Bytes and degrees in and out; mean position of predecessors/successors."""
  g = groups.num_groups
  src, dst = groups.edge_src, groups.edge_dst
  in_deg = np.bincount(dst, minlength=g).astype(np.float64)
  out_deg = np.bincount(src, minlength=g).astype(np.float64)
  pred_pos = np.bincount(dst, weights=position[src], minlength=g)
  succ_pos = np.bincount(src, weights=position[dst], minlength=g)
  pred_pos = np.where(in_deg > 0, pred_pos / np.maximum(in_deg, 1), position)
  succ_pos = np.where(out_deg > 0, succ_pos / np.maximum(out_deg, 1), position)
  return np.column_stack([
      _log_scaled(np.column_stack([groups.in_bytes, groups.out_bytes, in_deg,
                                   out_deg])),
      pred_pos - position, succ_pos - position])


def topo_position(groups: GroupGraph) -> np.ndarray:
  """float64 [G]: each group's rank in topological order, scaled to [0, 1]."""
  g = groups.num_groups
  rank = np.empty(g, np.float64)
  rank[groups.topo_order()] = np.arange(g, dtype=np.float64)
  return rank / max(g - 1, 1)


def group_features(graph: OpGraph, groups: GroupGraph,
                   vocabulary: Optional[Sequence[str]] = None
                   ) -> GroupFeatures:
  """The feature matrix of `groups` (a group graph of `graph`).

  Args:
    graph: the op graph the groups were built from.
    groups: its group graph (colocation groups or coarser).
    vocabulary: op types for the histogram; default the graph's most
      frequent ones.

  Returns:
    The `GroupFeatures`.
  """
  vocab = tuple(vocabulary) if vocabulary is not None else op_type_vocabulary(
      graph)
  position = topo_position(groups)
  sizes = np.column_stack([
      [len(m) for m in groups.members], groups.output_bytes,
      groups.param_bytes])
  freqs = np.pi * 2.0 ** np.arange(NUM_POSITION_FREQUENCIES)
  columns = [
      _log_scaled(groups.op_type_counts(graph.op_types, vocab)),
      _log_scaled(sizes), _compute_columns(groups.compute_s),
      _adjacency_columns(groups, position), position[:, None],
      np.sin(position[:, None] * freqs), np.cos(position[:, None] * freqs)]
  names = ([f"type:{t}" for t in vocab] + ["type:other", "ops",
                                           "output_bytes", "param_bytes"] +
           [f"compute:{d}" for d in range(groups.num_devices)] +
           ["in_bytes", "out_bytes", "in_degree", "out_degree",
            "pred_position", "succ_position", "position"] +
           [f"sin{k}" for k in range(NUM_POSITION_FREQUENCIES)] +
           [f"cos{k}" for k in range(NUM_POSITION_FREQUENCIES)])
  values = np.concatenate(columns, axis=1).astype(np.float32)
  return GroupFeatures(values=values, names=tuple(names), vocabulary=vocab)
