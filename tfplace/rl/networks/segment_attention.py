"""GDP's placement network: self-attention over segments with memory.

GDP (Zhou et al., 2019, section 3.2) places a graph's nodes with a
Transformer-XL (Dai et al., ACL 2019): the node sequence is cut into segments
of fixed length, and each segment attends to itself and to the previous
segment's hidden states (the memory, through which no gradient flows). It
is not autoregressive: every node's device comes out of one pass.

Here the memory of segment s at layer k is segment s-1's input to layer k,
as in Transformer-XL, so all segments are computed at once: the keys of
layer k are [shifted inputs ; inputs], [segments, 2 S, H]. Positions come
from the nodes' features (topological rank and its sinusoids,
`tfplace.rl.features`), not from Transformer-XL's relative position
encodings. Each layer is attention then a feed-forward block, each with a
residual connection and layer normalization; `gate` (GDP's parameter
superposition, section 3.3) scales every layer's input elementwise. The
sequence length is a constant of the layer; layers for several graphs can
share one set of weights (`share_weights_with`).
"""

from typing import Optional

import numpy as np
import tensorflow as tf

keras = tf.keras


def _block(i: int, hidden: int, heads: int):
  """Layer i's attention, its norm, the feed-forward pair and its norm."""
  key_dim = max(hidden // heads, 1)
  return (
      keras.layers.MultiHeadAttention(heads, key_dim, name=f"attention_{i}"),
      keras.layers.LayerNormalization(name=f"attention_norm_{i}"),
      keras.layers.Dense(2 * hidden, activation="relu", name=f"ffn_in_{i}"),
      keras.layers.Dense(hidden, name=f"ffn_out_{i}"),
      keras.layers.LayerNormalization(name=f"ffn_norm_{i}"))


class SegmentAttention(keras.layers.Layer):
  """Sequence [N, H] -> [N, H] (see the module docstring)."""

  def __init__(self, num_nodes: int, hidden: int = 64, layers: int = 2,
               heads: int = 4, segment_length: int = 64,
               name: str = "segment_attention",
               share_weights_with: Optional["SegmentAttention"] = None):
    """Args:
      num_nodes: N, the sequence length (a constant of the graph).
      hidden: model width H.
      layers: attention layers.
      heads: attention heads (H is split between them).
      segment_length: S, nodes per segment.
      share_weights_with: another graph's `SegmentAttention` of the same
        width, layers and heads whose blocks (and weights) this one uses.
    """
    super().__init__(name=name)
    if min(num_nodes, hidden, layers, heads, segment_length) < 1:
      raise ValueError("segment attention needs num_nodes, hidden, layers, "
                       "heads and segment_length >= 1")
    length = min(segment_length, num_nodes)
    segments = -(-num_nodes // length)
    self._num_nodes, self._length, self._segments = num_nodes, length, segments
    valid = np.arange(segments * length).reshape(segments, length) < num_nodes
    memory_valid = np.concatenate([np.zeros((1, length), bool), valid[:-1]])
    keys_valid = np.concatenate([memory_valid, valid], axis=1)
    self._mask = tf.constant(np.broadcast_to(
        keys_valid[:, None, :], (segments, length, 2 * length)))
    self.sizes = (hidden, layers, heads)
    if share_weights_with is not None:
      if share_weights_with.sizes != self.sizes:
        raise ValueError(
            f"cannot share attention weights of (width, layers, heads) "
            f"{share_weights_with.sizes} with {self.sizes}")
      self._blocks = share_weights_with._blocks
    else:
      self._blocks = [_block(i, hidden, heads) for i in range(layers)]

  @property
  def num_layers(self) -> int:
    return len(self._blocks)

  @property
  def num_segments(self) -> int:
    return self._segments

  def call(self, sequence: tf.Tensor, gate: Optional[tf.Tensor] = None,
           training: bool = False) -> tf.Tensor:
    """`sequence` [N, H]; `gate` None or [layers, H]: row k scales layer k's
    input."""
    h = tf.shape(sequence)[-1]
    padded = tf.pad(sequence,
                    [[0, self._segments * self._length - self._num_nodes],
                     [0, 0]])
    x = tf.reshape(padded, [self._segments, self._length, h])
    for i, (attention, norm, ffn_in, ffn_out, ffn_norm) in enumerate(
        self._blocks):
      if gate is not None:
        x = x * gate[i]
      memory = tf.stop_gradient(tf.concat([tf.zeros_like(x[:1]), x[:-1]], 0))
      keys = tf.concat([memory, x], axis=1)
      x = norm(x + attention(x, keys, attention_mask=self._mask,
                             training=training))
      x = ffn_norm(x + ffn_out(ffn_in(x)))
    return tf.reshape(x, [-1, h])[:self._num_nodes]
