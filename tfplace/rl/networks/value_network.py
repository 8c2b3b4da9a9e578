"""The value baseline: the expected reward of the current policy.

In a one-shot placement environment every episode starts from the same
observation, so the value is one number per graph; the network reads the
mean of the graph's unit features (constants) through a small MLP and
returns it for every batch entry.
"""

import numpy as np
import tensorflow as tf
from tf_agents.networks import network

keras = tf.keras


class GraphValueNetwork(network.Network):
  """Observations [B(, T)] -> values [B(, T)], the same for every entry."""

  def __init__(self, observation_spec, features: np.ndarray, hidden: int = 32,
               name: str = "GraphValueNetwork"):
    super().__init__(input_tensor_spec=observation_spec, state_spec=(),
                     name=name)
    pooled = np.asarray(features, np.float32).mean(axis=0, keepdims=True)
    self._pooled = tf.constant(pooled)
    self._hidden = keras.layers.Dense(hidden, activation="tanh")
    self._value = keras.layers.Dense(1)

  def call(self, observation, step_type=None, network_state=(),
           training=False):
    del step_type, training
    outer = tf.shape(observation["allowed"])[:-2]  # [B] or [B, T]
    value = self._value(self._hidden(self._pooled))[0, 0]
    return tf.fill(outer, value), network_state
