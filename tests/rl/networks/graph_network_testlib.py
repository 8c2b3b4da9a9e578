"""What the tests of the one-shot graph networks (gdp, mars) share: a chain
graph, the specs, and the checks of the masked head."""

import numpy as np
import tensorflow as tf
from tf_agents.specs import tensor_spec

from tfplace.rl.imitation import unit_logits

DEVICES = 3


def chain_edges(n):
  return np.arange(n - 1), np.arange(1, n)


def specs(num_units):
  obs = {"allowed": tensor_spec.TensorSpec((num_units, DEVICES), tf.bool)}
  return obs, tensor_spec.BoundedTensorSpec((num_units,), tf.int32, 0,
                                            DEVICES - 1)


def check_event_shape_mask_and_batch(net, n):
  """`net` over n units: event shape [n], batch shapes [4] and [2, 2], and
  device 2 masked for unit 1 is never sampled."""
  mask = np.ones((4, n, DEVICES), bool)
  mask[:, 1, 2] = False
  dist, _ = net({"allowed": tf.constant(mask)})
  assert dist.event_shape == (n,) and dist.batch_shape == (4,)
  assert tf.nn.softmax(unit_logits(dist)).numpy()[1, 2] == 0.0
  samples = dist.sample(100).numpy()
  assert samples.shape == (100, 4, n) and not np.any(samples[..., 1] == 2)
  dist, _ = net({"allowed": tf.constant(mask.reshape(2, 2, n, DEVICES))})
  assert dist.batch_shape == (2, 2)
  assert dist.log_prob(samples[:2, :2]).shape == (2, 2)
