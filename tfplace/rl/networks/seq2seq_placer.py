"""ColocRL's placer network: units in topological order -> a device each."""

import numpy as np
import tensorflow as tf
from tf_agents.networks import network

from tfplace.rl.networks.heads import (RowBias, allowed_everywhere,
                                      placement_distribution)
from tfplace.rl.networks.seq2seq import AttentionalSeq2Seq


class Seq2SeqPlacerNetwork(network.Network):
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
    super().__init__(input_tensor_spec=observation_spec, state_spec=(),
                     name=name)
    num_devices = int(action_spec.maximum) - int(action_spec.minimum) + 1
    order = np.asarray(order, dtype=np.int32)
    self._sequence = tf.constant(np.asarray(features, np.float32)[order][None])
    self._unsort = tf.constant(np.argsort(order).astype(np.int32))
    self._core = AttentionalSeq2Seq(num_devices, hidden)
    self.shared_logits = shared_logits
    self._bias = RowBias(len(order), num_devices, bias_scale,
                         name="unit_bias")

  def output_biases(self) -> RowBias:
    """The per-unit bias [U, D] (fitted by the imitation warm start)."""
    return self._bias

  def unit_logits(self, training: bool = False) -> tf.Tensor:
    """float32 [U, D], unmasked logits in unit id order."""
    logits = self._core(self._sequence, training=training)[0]
    return tf.gather(logits, self._unsort) + self._bias()

  def call(self, observation, step_type=None, network_state=(),
           training=False):
    del step_type
    allowed = tf.cast(observation["allowed"], tf.bool)
    batch_shape = tf.shape(allowed)[:-2]
    if self.shared_logits:
      allowed = allowed_everywhere(allowed)
    return placement_distribution(self.unit_logits(training), allowed,
                                  batch_shape, self.shared_logits), network_state
