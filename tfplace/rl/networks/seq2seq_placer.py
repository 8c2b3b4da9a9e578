"""ColocRL's placer network: units in topological order -> a device each."""

import numpy as np
import tensorflow as tf

from tfplace.rl.networks.seq2seq import AttentionalSeq2Seq
from tfplace.rl.networks.unit_placer import UnitPlacerNetwork


class Seq2SeqPlacerNetwork(UnitPlacerNetwork):
  """Attentional seq2seq over units (Mirhoseini et al., ICML 2017).

  Input: the observation ``{"allowed": bool [B, U, D]}``. Output: a
  distribution with event shape [U] over masked logits (see
  `heads.placement_distribution`).
  The units' features are constants of the network (the graph is the same in
  every episode), so the LSTMs run once per call whatever the batch size.
  A trainable bias per unit and device is added to the seq2seq logits: the
  seq2seq shares what it learns across similar units, the bias lets each
  unit move on its own (and lets the warm start reach the start placement in
  a few dozen steps).
  """

  def __init__(self, observation_spec, action_spec, features: np.ndarray,
               order: np.ndarray, hidden: int = 64, shared_logits: bool = True,
               bias_scale: float = 1.0, name: str = "Seq2SeqPlacerNetwork"):
    """Args:
      observation_spec: the environment's observation spec (a TensorSpec
        nest with "allowed").
      action_spec: the action spec, int [U] in [0, D).
      features: float32 [U, F] per-unit features (unit id order).
      order: int [U], the unit ids in the order the encoder reads them
        (topological).
      hidden: LSTM width.
      shared_logits: one logits table for the whole batch (fast; REINFORCE)
        or logits per batch entry (what PPO logs).
      bias_scale: speed of the per-unit biases relative to the weights
        (`heads.RowBias`).
    """
    super().__init__(observation_spec, action_spec, len(order), shared_logits,
                     bias_scale, name)
    order = np.asarray(order, dtype=np.int32)
    self._sequence = tf.constant(np.asarray(features, np.float32)[order][None])
    self._unsort = tf.constant(np.argsort(order).astype(np.int32))
    self._core = AttentionalSeq2Seq(self.num_devices, hidden)

  def network_logits(self, training: bool) -> tf.Tensor:
    logits = self._core(self._sequence, training=training)[0]
    return tf.gather(logits, self._unsort)
