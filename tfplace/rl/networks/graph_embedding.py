"""Placeto's graph embedding: message passing over the group DAG, then pooled
summaries of the current group's ancestors, descendants and parallel peers.

Addanki et al. (NeurIPS 2019), section 3.2: (a) per-group attributes,
(b) local neighbourhood summarization by message passing, (c) pooling of the
embeddings into separate summaries of the groups that run before the current
group (ancestors), after it (descendants) and independently of it (parallel
peers). Here:

  * messages go in both directions, a fixed number of rounds: each round a
    group averages a learned transform of its predecessors' embeddings and,
    separately, of its successors', and updates its own embedding from both
    (weights differ per round and per direction);
  * the pooled summaries are means over the three sets and the current
    group's own embedding.

Written with plain TensorFlow sparse and dense ops, not TensorFlow GNN: its
release (1.0.3) does not install beside the pinned TensorFlow 2.21 without
downgrading protobuf and pulling in Apache Beam (see WORKSPACE_NOTES.md).
The graph is the same in every state, so the adjacency is two constant
sparse matrices (mean over predecessors, mean over successors) and one round
is one sparse-dense product per direction for the whole batch of states:
embeddings are kept node-major, [G, N, H] for N states.
"""

import numpy as np
import tensorflow as tf

from tfplace.rl.progressive_graph import ProgressiveGraph

keras = tf.keras


def mean_adjacency(num_nodes: int, rows: np.ndarray,
                   cols: np.ndarray) -> tf.sparse.SparseTensor:
  """[G, G] sparse: row r averages the columns c of its (r, c) pairs."""
  rows, cols = np.asarray(rows, np.int64), np.asarray(cols, np.int64)
  degree = np.bincount(rows, minlength=num_nodes).astype(np.float32)
  values = 1.0 / np.maximum(degree[rows], 1.0)
  order = np.lexsort((cols, rows))
  return tf.sparse.SparseTensor(
      np.stack([rows[order], cols[order]], axis=1), values[order],
      [num_nodes, num_nodes])


def propagate(adjacency: tf.sparse.SparseTensor, x: tf.Tensor) -> tf.Tensor:
  """[G, G] sparse times node-major [G, N, H] -> [G, N, H]."""
  shape = tf.shape(x)
  flat = tf.reshape(x, [shape[0], -1])
  return tf.reshape(tf.sparse.sparse_dense_matmul(adjacency, flat), shape)


class GraphEmbedding(keras.layers.Layer):
  """Node-major features [G, N, F] -> embeddings [G, N, H] by message
  passing in both directions over the DAG (see the module docstring)."""

  def __init__(self, graph: ProgressiveGraph, hidden: int = 32,
               rounds: int = 2, name: str = "graph_embedding"):
    """Args:
      graph: the constant view of the group graph (edges).
      hidden: embedding width H.
      rounds: message-passing rounds (each in both directions).
    """
    super().__init__(name=name)
    g = graph.num_groups
    self._from_predecessors = mean_adjacency(g, graph.edge_dst,
                                             graph.edge_src)
    self._from_successors = mean_adjacency(g, graph.edge_src, graph.edge_dst)
    dense = lambda n: keras.layers.Dense(hidden, activation="relu", name=n)
    self._embed = dense("embed")
    self._rounds = [(dense(f"forward_{r}"), dense(f"backward_{r}"),
                     dense(f"update_{r}")) for r in range(rounds)]

  def call(self, nodes: tf.Tensor) -> tf.Tensor:
    h = self._embed(nodes)
    for forward, backward, update in self._rounds:
      down = propagate(self._from_predecessors, forward(h))
      up = propagate(self._from_successors, backward(h))
      h = update(tf.concat([h, down, up], axis=-1))
    return h


def pooled_summaries(embeddings: tf.Tensor, masks: tf.Tensor) -> tf.Tensor:
  """Means of node embeddings over sets of nodes, one set per state.

  Args:
    embeddings: float32 [G, N, H], node-major.
    masks: float32 [K, N, G], K sets per state (1 = member).

  Returns:
    float32 [N, K * H]: the K means side by side (0 for an empty set).
  """
  sums = tf.einsum("kng,gnh->knh", masks, embeddings)
  counts = tf.reduce_sum(masks, axis=-1, keepdims=True)
  means = sums / tf.maximum(counts, 1.0)
  return tf.concat(tf.unstack(means, axis=0), axis=-1)
