"""Mars's graph encoder: a graph convolutional network (GCN).

Kipf and Welling, "Semi-Supervised Classification with Graph Convolutional
Networks" (ICLR 2017), as Deep Graph Infomax (Velickovic et al., ICLR 2019)
and Mars (Lan, Chen, Li, 2021) use it: each layer gives

    H' = PReLU(A_hat H W),   A_hat = D^-1/2 (A + I) D^-1/2

with A the graph's adjacency taken undirected (the direction is in the
features: the mean topological position of each side) and D the degrees of
A + I. The weights do not depend on the graph, the adjacency is a constant
sparse matrix of the network, and one layer is a dense layer and one
sparse-dense product.
"""

import numpy as np
import tensorflow as tf

from tfplace.rl.networks.graphsage import undirected_pairs

keras = tf.keras


def normalized_adjacency(num_nodes: int, edge_src: np.ndarray,
                         edge_dst: np.ndarray) -> tf.sparse.SparseTensor:
  """[N, N] sparse D^-1/2 (A + I) D^-1/2 of the undirected graph."""
  senders, receivers = undirected_pairs(num_nodes, edge_src, edge_dst)
  loops = np.arange(num_nodes, dtype=np.int64)
  rows = np.concatenate([receivers.astype(np.int64), loops])
  cols = np.concatenate([senders.astype(np.int64), loops])
  degree = np.bincount(rows, minlength=num_nodes).astype(np.float64)
  values = (1.0 / np.sqrt(degree[rows] * degree[cols])).astype(np.float32)
  order = np.lexsort((cols, rows))
  return tf.sparse.SparseTensor(np.stack([rows[order], cols[order]], 1),
                                values[order], [num_nodes, num_nodes])


class GraphConvolution(keras.layers.Layer):
  """Node features [N, F] -> embeddings [N, H] (see the module docstring)."""

  def __init__(self, num_nodes: int, edge_src: np.ndarray,
               edge_dst: np.ndarray, hidden: int = 64, layers: int = 2,
               name: str = "gcn"):
    """Args:
      num_nodes: N.
      edge_src, edge_dst: the directed edges (node ids).
      hidden: embedding width H.
      layers: graph convolutions (hops a node's embedding sees).
    """
    super().__init__(name=name)
    if layers < 1 or hidden < 1:
      raise ValueError(f"a GCN needs layers >= 1 and hidden >= 1, got "
                       f"{layers} and {hidden}")
    self._adjacency = normalized_adjacency(num_nodes, edge_src, edge_dst)
    self._layers = [
        (keras.layers.Dense(hidden, use_bias=False, name=f"weights_{i}"),
         keras.layers.PReLU(alpha_initializer=keras.initializers.Constant(0.25),
                            name=f"prelu_{i}"))
        for i in range(layers)]

  def call(self, nodes: tf.Tensor) -> tf.Tensor:
    h = tf.convert_to_tensor(nodes, tf.float32)
    for dense, activation in self._layers:
      h = activation(tf.sparse.sparse_dense_matmul(self._adjacency, dense(h)))
    return h
