"""Placeto's policy and value networks (Addanki et al., NeurIPS 2019).

`PlacetoNetwork` maps an observation of `ProgressiveEnvironment` to a
categorical distribution over devices for the group being placed:

  1. per-group inputs (`placeto_inputs.PlacetoInputs.node_features`);
  2. the graph embedding (`graph_embedding.GraphEmbedding`): message passing
     in both directions over the group DAG for a fixed number of rounds;
  3. pooled summaries of the current group, its ancestors, its descendants
     and its parallel peers (`graph_embedding.pooled_summaries`);
  4. the policy head: a three-layer fully connected network (as the paper's)
     scores each device from the summaries and that device's features
     (`PlacetoInputs.device_features`), with weights shared across devices
     plus a learned bias per device, and a "stay" logit on the device the
     group is on now (the warm start sets it so that a sample keeps the
     start placement but for a few groups). Devices the group may not use
     (no kernel, too little memory: the observation's ``allowed``) get the
     logit `heads.MASKED_LOGIT`, probability exactly 0.

Per-sample logits, so both REINFORCE and PPO (which logs them) can use it.
`PlacetoValueNetwork` is the value baseline: a smaller embedding of the
same inputs, mean-pooled, with the episode's progress and the current step
time.
"""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp
from tf_agents.networks import network

from tfplace.rl.networks.graph_embedding import (GraphEmbedding,
                                                 pooled_summaries)
from tfplace.rl.networks.heads import masked_logits
from tfplace.rl.networks.placeto_inputs import PlacetoInputs, flatten_outer
from tfplace.rl.progressive_graph import ProgressiveGraph

keras = tf.keras


class PlacetoNetwork(network.Network):
  """Observation -> categorical distribution over the devices."""

  def __init__(self, observation_spec, action_spec, graph: ProgressiveGraph,
               hidden: int = 32, rounds: int = 2,
               name: str = "PlacetoNetwork"):
    """Args:
      observation_spec: `ProgressiveEnvironment`'s (tensor specs).
      action_spec: int32 scalar in [0, D).
      graph: the constant view of the group graph.
      hidden: embedding and head width.
      rounds: message-passing rounds.
    """
    super().__init__(input_tensor_spec=observation_spec, state_spec=(),
                     name=name)
    self._num_devices = int(action_spec.maximum) + 1
    self._inputs = PlacetoInputs(graph)
    self._embedding = GraphEmbedding(graph, hidden, rounds)
    self._head = keras.Sequential([
        keras.layers.Dense(hidden, activation="relu"),
        keras.layers.Dense(hidden, activation="relu"),
        keras.layers.Dense(1, kernel_initializer=(
            keras.initializers.VarianceScaling(0.01)))], name="head")
    self._device_bias = tf.Variable(tf.zeros([self._num_devices]),
                                    name="device_bias")
    self.stay_logit = tf.Variable(0.0, name="stay_logit")

  def set_stay_probability(self, keep: float) -> None:
    """Sets the stay logit so that, at near-zero head logits, a group stays
    on its device with probability `keep` (others share the rest)."""
    keep = float(np.clip(keep, 1e-6, 1 - 1e-6))
    others = max(self._num_devices - 1, 1)
    self.stay_logit.assign(np.log(keep * others / (1.0 - keep)))

  def logits(self, observation, training: bool = False) -> tf.Tensor:
    """float32 [N, D] masked logits for flattened observations."""
    obs = observation
    embeddings = self._embedding(self._inputs.node_features(obs))
    summary = pooled_summaries(embeddings, self._inputs.relation_masks(obs))
    devices = self._inputs.device_features(obs)  # [N, D, k]
    shape = tf.concat([tf.shape(devices)[:2], tf.shape(summary)[1:]], 0)
    joint = tf.concat([tf.broadcast_to(summary[:, None], shape), devices], -1)
    logits = self._head(joint, training=training)[..., 0] + self._device_bias
    logits += self.stay_logit * devices[..., -1]
    return masked_logits(logits, obs["allowed"])

  def call(self, observation, step_type=None, network_state=(),
           training=False):
    del step_type
    flat, outer = flatten_outer(observation)
    logits = self.logits(flat, training)
    logits = tf.reshape(logits, tf.concat([outer, [self._num_devices]], 0))
    return tfp.distributions.Categorical(logits=logits,
                                         dtype=tf.int32), network_state


class PlacetoValueNetwork(network.Network):
  """Observation -> the expected return from it (one number per state)."""

  def __init__(self, observation_spec, graph: ProgressiveGraph,
               hidden: int = 32, name: str = "PlacetoValueNetwork"):
    super().__init__(input_tensor_spec=observation_spec, state_spec=(),
                     name=name)
    self._inputs = PlacetoInputs(graph)
    self._embedding = GraphEmbedding(graph, hidden, rounds=1)
    self._head = keras.Sequential([
        keras.layers.Dense(hidden, activation="tanh"),
        keras.layers.Dense(1)], name="value_head")

  def call(self, observation, step_type=None, network_state=(),
           training=False):
    del step_type
    flat, outer = flatten_outer(observation)
    embeddings = self._embedding(self._inputs.node_features(flat))
    pooled = tf.reduce_mean(embeddings, axis=0)  # [N, H]
    progress = tf.cast(flat["step"], tf.float32) / self._inputs.num_groups
    state = tf.stack([progress, flat["step_time"]], axis=-1)
    value = self._head(tf.concat([pooled, state], -1), training=training)
    return tf.reshape(value, outer), network_state
