"""The attentional sequence-to-sequence core of ColocRL's placer.

Mirhoseini et al. (ICML 2017): an LSTM encoder reads the embeddings of the
units in topological order; an LSTM decoder with (Bahdanau) attention over
the encoder states emits one device per unit. Here the encoder is
bidirectional, and the decoder's input at step t is the encoder state t
rather than the device it sampled at step t-1: the devices of a placement
are then conditionally independent given the graph, so the placement
distribution is a product of categoricals that tf-agents' PPO can rebuild
from logged logits. Units still see each other through both LSTMs and the
attention.
"""

import tensorflow as tf

keras = tf.keras


def attention_head(hidden: int, num_outputs: int):
  """The output layers of a seq2seq placer: (Bahdanau) attention of the
  decoder states over the encoder states, tanh(W [decoded; context]), and
  logits initialized near zero (every device about equally likely)."""
  return (keras.layers.AdditiveAttention(name="attention"),
          keras.layers.Dense(hidden, activation="tanh", name="combine"),
          keras.layers.Dense(
              num_outputs, name="logits",
              kernel_initializer=keras.initializers.VarianceScaling(0.01)))


class AttentionalSeq2Seq(keras.layers.Layer):
  """[1, L, F] unit features (in sequence order) -> [1, L, K] logits."""

  def __init__(self, num_outputs: int, hidden: int = 64, name: str = "seq2seq"):
    """Args:
      num_outputs: K, logits per unit (the number of devices).
      hidden: LSTM width (the encoder's two directions get half each).
    """
    super().__init__(name=name)
    self._embed = keras.layers.Dense(hidden, activation="relu", name="embed")
    self._encoder = keras.layers.Bidirectional(
        keras.layers.LSTM(hidden // 2, return_sequences=True), name="encoder")
    self._decoder = keras.layers.LSTM(hidden, return_sequences=True,
                                      name="decoder")
    self._attention, self._combine, self._logits = attention_head(
        hidden, num_outputs)

  def call(self, units: tf.Tensor, training: bool = False) -> tf.Tensor:
    x = self._embed(units)
    encoded = self._encoder(x, training=training)
    decoded = self._decoder(encoded, training=training)
    context = self._attention([decoded, encoded])
    return self._logits(self._combine(tf.concat([decoded, context], -1)))
