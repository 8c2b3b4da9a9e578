"""The hierarchical planner's network: a learned grouper and a seq2seq placer.

Mirhoseini et al. (ICLR 2018), "A Hierarchical Model for Device Placement":
a feed-forward grouper gives each op a softmax over N groups; a seq2seq placer
reads one embedding per group and gives each group a device; both are
trained jointly with the policy gradient of the sampled (grouping, placement).

Here the grouper's inputs are colocation groups (a colocation group is never
split: it is one row of the grouper). Its softmax has N + D entries: the N
groups, and D "pinned to device d" entries that only colocation groups that
cannot go everywhere may take (`codecs.HierarchicalCodec`), so kernel and
memory masks stay exact. The placer's group embeddings are the members'
features averaged with the grouper's probabilities (the expected grouping),
so the grouping and the placement are sampled independently given the graph:
the joint log-probability is the sum of both parts, and PPO can rebuild the
distribution from the logged logits. Gradients reach the grouper both
through its own samples and through the placer's embeddings. Each output
also has a trainable bias per row (colocation group, group), as the ColocRL
network has per unit.
"""

import numpy as np
import tensorflow as tf
from tf_agents.networks import network

from tfplace.rl.networks.heads import (RowBias, allowed_everywhere,
                                      placement_distribution)
from tfplace.rl.networks.seq2seq import AttentionalSeq2Seq

keras = tf.keras


class HierarchicalNetwork(network.Network):
  """Observation -> {"groups": grouping, "devices": placement of groups}.

  Input: ``{"allowed": bool [B, G, D]}`` for the colocation groups. Output:
  a dict of distributions (`heads.placement_distribution`): ``groups``
  over [G, N + D] masked logits and ``devices`` over [N, D] logits.
  """

  def __init__(self, observation_spec, action_spec, features: np.ndarray,
               hidden: int = 64, grouper_hidden: int = 64,
               shared_logits: bool = True, bias_scale: float = 1.0,
               name: str = "HierarchicalNetwork"):
    """Args:
      observation_spec: the environment's observation spec.
      action_spec: {"groups": int [G] in [0, N+D), "devices": int [N]}.
      features: float32 [G, F], per colocation group.
      hidden: the placer's LSTM width.
      grouper_hidden: the grouper's hidden layer width.
      shared_logits: one logits table for the whole batch (fast; REINFORCE)
        or logits per batch entry (what PPO logs).
      bias_scale: speed of the per-row biases relative to the weights
        (`heads.RowBias`).
    """
    super().__init__(input_tensor_spec=observation_spec, state_spec=(),
                     name=name)
    self._num_devices = int(action_spec["devices"].maximum) + 1
    self._num_groups = int(action_spec["devices"].shape[0])
    self._features = tf.constant(np.asarray(features, np.float32))
    self.shared_logits = shared_logits
    self._grouper = keras.Sequential([
        keras.layers.Dense(grouper_hidden, activation="relu"),
        keras.layers.Dense(grouper_hidden, activation="relu"),
        keras.layers.Dense(self._num_groups + self._num_devices,
                           kernel_initializer=keras.initializers.VarianceScaling(
                               0.01))], name="grouper")
    self._placer = AttentionalSeq2Seq(self._num_devices, hidden,
                                      name="placer")
    self._grouper_bias = RowBias(
        features.shape[0], self._num_groups + self._num_devices, bias_scale,
        name="grouper_bias")
    self._placer_bias = RowBias(self._num_groups, self._num_devices,
                                bias_scale, name="placer_bias")

  def output_biases(self):
    """Per-row biases of both outputs (fitted by the imitation warm start)."""
    return {"devices": self._placer_bias, "groups": self._grouper_bias}

  def grouper_logits(self) -> tf.Tensor:
    """float32 [G, N + D], unmasked."""
    return self._grouper(self._features) + self._grouper_bias()

  def placer_logits(self, grouper_logits: tf.Tensor,
                    training: bool = False) -> tf.Tensor:
    """float32 [N, D] from the expected grouping's group embeddings."""
    n = self._num_groups
    weights = tf.nn.softmax(grouper_logits[:, :n], axis=-1)  # [G, N]
    mass = tf.reduce_sum(weights, axis=0)[:, None]  # [N, 1]
    mean = tf.matmul(weights, self._features, transpose_a=True) / (mass + 1e-6)
    total = float(self._features.shape[0])
    size = tf.math.log1p(mass) / np.log1p(total)
    embeddings = tf.concat([mean, size], axis=-1)[None]
    return self._placer(embeddings, training=training)[0] + self._placer_bias()

  def call(self, observation, step_type=None, network_state=(),
           training=False):
    del step_type
    allowed = tf.cast(observation["allowed"], tf.bool)  # [..., G, D]
    batch_shape = tf.shape(allowed)[:-2]
    if self.shared_logits:
      allowed = allowed_everywhere(allowed)
    free = tf.reduce_all(allowed, axis=-1, keepdims=True)  # [..., G, 1]
    group_shape = tf.concat([tf.shape(allowed)[:-1], [self._num_groups]], 0)
    group_mask = tf.concat([tf.broadcast_to(free, group_shape),
                            tf.logical_and(~free, allowed)], axis=-1)
    logits = self.grouper_logits()
    placer = self.placer_logits(logits, training)
    shared = self.shared_logits
    return {
        "groups": placement_distribution(logits, group_mask, batch_shape,
                                         shared),
        "devices": placement_distribution(placer, tf.ones_like(
            placer, tf.bool), batch_shape, shared),
    }, network_state
