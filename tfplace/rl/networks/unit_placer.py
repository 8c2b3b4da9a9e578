"""What the one-shot unit placers' networks share: the masked output head.

A one-shot placer network (`seq2seq_placer`, `gdp_network`) computes logits
[U, D] for its U units from constants of the graph, adds a trainable bias per
unit and device (`heads.RowBias`: it lets each unit move on its own, and the
imitation warm start fits it), and turns them into the masked placement
distribution of the observation's batch. Subclasses implement
`network_logits`.
"""

import tensorflow as tf
from tf_agents.networks import network

from tfplace.rl.networks.heads import (RowBias, allowed_everywhere,
                                      placement_distribution)


class UnitPlacerNetwork(network.Network):
  """Observation ``{"allowed": bool [B, U, D]}`` -> a distribution with event
  shape [U] over masked logits (`heads.placement_distribution`)."""

  def __init__(self, observation_spec, action_spec, num_units: int,
               shared_logits: bool, bias_scale: float, name: str):
    """Args:
      observation_spec: the environment's observation spec ("allowed").
      action_spec: int [U] in [0, D).
      num_units: U.
      shared_logits: one logits table for the whole batch (fast; REINFORCE)
        or logits per batch entry (what PPO logs).
      bias_scale: speed of the per-unit biases relative to the weights.
    """
    super().__init__(input_tensor_spec=observation_spec, state_spec=(),
                     name=name)
    self.num_devices = int(action_spec.maximum) - int(action_spec.minimum) + 1
    self.shared_logits = shared_logits
    self._bias = RowBias(num_units, self.num_devices, bias_scale,
                         name="unit_bias")

  def network_logits(self, training: bool) -> tf.Tensor:
    """float32 [U, D], the learned layers' logits in unit id order."""
    raise NotImplementedError

  def output_biases(self) -> RowBias:
    """The per-unit bias [U, D] (fitted by the imitation warm start)."""
    return self._bias

  def unit_logits(self, training: bool = False) -> tf.Tensor:
    """float32 [U, D], unmasked logits in unit id order."""
    return self.network_logits(training) + self._bias()

  def call(self, observation, step_type=None, network_state=(),
           training=False):
    del step_type
    allowed = tf.cast(observation["allowed"], tf.bool)
    batch_shape = tf.shape(allowed)[:-2]
    if self.shared_logits:
      allowed = allowed_everywhere(allowed)
    distribution = placement_distribution(
        self.unit_logits(training), allowed, batch_shape, self.shared_logits)
    return distribution, network_state
