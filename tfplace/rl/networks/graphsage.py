"""GDP's graph embedding: GraphSAGE with a max-pooling aggregator.

Hamilton, Ying, Leskovec, "Inductive Representation Learning on Large
Graphs" (NeurIPS 2017), as GDP (Zhou et al., 2019, section 3.1) uses it: each
layer l gives node v

    n_v = max over neighbours u of relu(W_pool h_u + b_pool)
    h_v = l2_normalize(relu(W [h_v ; n_v]))

where the neighbours are the node's predecessors and successors (GDP embeds
the graph undirected; the direction is in the features: the mean
topological position of each side). The weights do not depend on the graph's
size or shape, so a trained embedding applies to other graphs (GDP's
generalization). A node without neighbours gets n_v = 0.

The graph is a constant of the network: the edges are two int32 vectors
and one layer is a gather, a segment max and two dense layers. Embeddings of
several graphs can share one set of weights (`share_weights_with`: GDP's
batch training over several graphs, `tfplace.rl.batch_training`).
"""

from typing import Optional

import numpy as np
import tensorflow as tf

keras = tf.keras


def undirected_pairs(num_nodes: int, src: np.ndarray, dst: np.ndarray):
  """int32 (sender, receiver) of every edge in both directions, self-loops
  and repeated pairs dropped."""
  src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
  pairs = np.unique(np.concatenate([src * num_nodes + dst,
                                    dst * num_nodes + src]))
  senders, receivers = pairs // num_nodes, pairs % num_nodes
  keep = senders != receivers
  return senders[keep].astype(np.int32), receivers[keep].astype(np.int32)


class GraphSage(keras.layers.Layer):
  """Node features [N, F] -> embeddings [N, H] (see the module docstring)."""

  def __init__(self, num_nodes: int, edge_src: np.ndarray,
               edge_dst: np.ndarray, hidden: int = 64, layers: int = 3,
               name: str = "graphsage",
               share_weights_with: Optional["GraphSage"] = None):
    """Args:
      num_nodes: N.
      edge_src, edge_dst: the directed edges (node ids).
      hidden: embedding width H.
      layers: GraphSAGE layers (hops a node's embedding sees).
      share_weights_with: another graph's `GraphSage` of the same sizes whose
        dense layers (and so weights) this one uses; None: its own.
    """
    super().__init__(name=name)
    if layers < 1 or hidden < 1:
      raise ValueError(f"GraphSAGE needs layers >= 1 and hidden >= 1, got "
                       f"{layers} and {hidden}")
    senders, receivers = undirected_pairs(num_nodes, edge_src, edge_dst)
    self._num_nodes = num_nodes
    self._senders = tf.constant(senders)
    self._receivers = tf.constant(receivers)
    if share_weights_with is not None:
      other = share_weights_with
      if (other.hidden, len(other._layers)) != (hidden, layers):
        raise ValueError(
            f"cannot share GraphSAGE weights of width {other.hidden} and "
            f"{len(other._layers)} layers with width {hidden} and {layers}")
      self._layers = other._layers
    else:
      self._layers = [
          (keras.layers.Dense(hidden, activation="relu", name=f"pool_{i}"),
           keras.layers.Dense(hidden, activation="relu", name=f"update_{i}"))
          for i in range(layers)]
    self.hidden = hidden

  def call(self, nodes: tf.Tensor) -> tf.Tensor:
    h = tf.convert_to_tensor(nodes, tf.float32)
    for pool, update in self._layers:
      messages = tf.gather(pool(h), self._senders)
      neighbours = tf.math.unsorted_segment_max(messages, self._receivers,
                                                self._num_nodes)
      # Messages are >= 0 (relu); an empty segment's max is the lowest float.
      neighbours = tf.maximum(neighbours, 0.0)
      h = tf.math.l2_normalize(update(tf.concat([h, neighbours], -1)), -1)
    return h
