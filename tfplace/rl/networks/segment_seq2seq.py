"""Mars's light-weight placer: a segment-level sequence-to-sequence network.

Mars (Lan, Chen, Li, 2021) places the node sequence segment by segment
rather than all at once, so that no LSTM has to carry a whole long graph:
the sequence (topological order) is cut into segments of S nodes; an LSTM
encoder reads a segment, an LSTM decoder with (Bahdanau) attention over that
segment's encoder states gives each of its nodes logits, and the next
segment's encoder starts from this segment's final decoder state, which is
how a segment knows what came before it.

As in ColocRL's core (`seq2seq`), the decoder's input at step t is the
encoder state t, not the device sampled at t-1: the devices are then
conditionally independent given the graph, a product of categoricals that
tf-agents' PPO can rebuild from logged logits. The segments after the first
go through one `tf.scan` (the first builds the layers), so the traced graph
holds each LSTM twice whatever the number of segments; the last segment is
padded, and its padding is masked out of the attention.
"""

import numpy as np
import tensorflow as tf

from tfplace.rl.networks.seq2seq import attention_head

keras = tf.keras


class SegmentSeq2Seq(keras.layers.Layer):
  """[1, L, H] node embeddings (in sequence order) -> [1, L, K] logits."""

  def __init__(self, num_outputs: int, hidden: int = 64,
               segment_length: int = 32, name: str = "segment_seq2seq"):
    """Args:
      num_outputs: K, logits per node (the number of devices).
      hidden: LSTM width.
      segment_length: S, nodes per segment.
    """
    super().__init__(name=name)
    if min(num_outputs, hidden, segment_length) < 1:
      raise ValueError("a segment seq2seq needs num_outputs, hidden and "
                       "segment_length >= 1")
    self.segment_length = segment_length
    self._hidden = hidden
    self._encoder = keras.layers.LSTM(hidden, return_sequences=True,
                                      return_state=True, name="encoder")
    self._decoder = keras.layers.LSTM(hidden, return_sequences=True,
                                      return_state=True, name="decoder")
    self._attention, self._combine, self._logits = attention_head(
        hidden, num_outputs)

  def _segment(self, state, segment, valid):
    """One segment [1, S, H] from `state` -> (final decoder state, [1, S, H]
    outputs)."""
    encoded, *encoder_state = self._encoder(segment, initial_state=state)
    decoded, *state = self._decoder(encoded, initial_state=encoder_state)
    context = self._attention([decoded, encoded], mask=[None, valid])
    return state, self._combine(tf.concat([decoded, context], -1))

  def call(self, sequence: tf.Tensor, training: bool = False) -> tf.Tensor:
    del training  # No dropout or normalization.
    _, length, width = sequence.shape
    size = min(self.segment_length, length)
    count = -(-length // size)
    valid = tf.constant(
        (np.arange(count * size) < length).reshape(count, 1, size))
    padded = tf.pad(sequence[0], [[0, count * size - length], [0, 0]])
    segments = tf.reshape(padded, [count, 1, size, width])
    zeros = tf.zeros([1, self._hidden])
    state, first = self._segment([zeros, zeros], segments[0], valid[0])
    outputs = first
    if count > 1:
      def scanned(carry, inputs):
        state, out = self._segment(list(carry[:2]), *inputs)
        return (state[0], state[1], out)

      rest = tf.scan(scanned, (segments[1:], valid[1:]),
                     initializer=(state[0], state[1], first))[2]
      outputs = tf.concat([first[None], rest], axis=0)
    flat = tf.reshape(outputs, [count * size, self._hidden])[:length]
    return self._logits(flat)[None]
