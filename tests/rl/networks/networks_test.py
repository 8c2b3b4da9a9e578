"""The placer networks: event shapes, masks, batch and time dimensions."""

import tfplace  # noqa: F401  (before TensorFlow)

import numpy as np
import pytest
import tensorflow as tf
from tf_agents.specs import tensor_spec

from tfplace.rl.imitation import unit_logits
from tfplace.rl.networks.heads import (MASKED_LOGIT, allowed_everywhere,
                                      masked_logits, placement_distribution)
from tfplace.rl.networks.hierarchical_network import HierarchicalNetwork
from tfplace.rl.networks.seq2seq_placer import Seq2SeqPlacerNetwork
from tfplace.rl.networks.value_network import GraphValueNetwork

UNITS, DEVICES, FEATURES = 5, 3, 4


def bounded(shape, num_choices):
  return tensor_spec.BoundedTensorSpec(shape, tf.int32, 0, num_choices - 1)


def specs(num_units, action):
  obs = {"allowed": tensor_spec.TensorSpec((num_units, DEVICES), tf.bool)}
  if isinstance(action, dict):
    return obs, {k: bounded(*v) for k, v in action.items()}
  return obs, bounded(*action)


def allowed(batch_shape, num_units):
  mask = np.ones(batch_shape + (num_units, DEVICES), bool)
  mask[..., 1, 2] = False  # Unit 1 may not use device 2.
  return {"allowed": tf.constant(mask)}


def features(n):
  return np.random.default_rng(0).normal(size=(n, FEATURES)).astype(np.float32)


@pytest.mark.parametrize("shared", [True, False])
def test_seq2seq_event_shape_and_mask(shared):
  obs_spec, act_spec = specs(UNITS, ((UNITS,), DEVICES))
  net = Seq2SeqPlacerNetwork(obs_spec, act_spec, features(UNITS),
                             order=np.array([4, 3, 2, 1, 0]), hidden=8,
                             shared_logits=shared)
  dist, _ = net(allowed((6,), UNITS))
  assert dist.event_shape == (UNITS,) and dist.batch_shape == (6,)
  assert tf.nn.softmax(unit_logits(dist)).numpy()[1, 2] == 0.0
  samples = dist.sample(200).numpy()
  assert samples.shape == (200, 6, UNITS)
  assert not np.any(samples[..., 1] == 2)
  dist, _ = net(allowed((2, 3), UNITS))  # [B, T] as the agents call it.
  assert dist.batch_shape == (2, 3)
  assert dist.log_prob(samples[:2, :3]).shape == (2, 3)


def test_shared_and_per_sample_heads_agree():
  logits = tf.constant(features(UNITS)[:, :DEVICES])
  mask = allowed((4, 2), UNITS)["allowed"]
  shared = placement_distribution(logits, allowed_everywhere(mask),
                                  tf.constant([4, 2]), True)
  each = placement_distribution(logits, mask, tf.constant([4, 2]), False)
  x = each.sample(seed=1)
  np.testing.assert_allclose(shared.log_prob(x), each.log_prob(x), rtol=1e-6)
  np.testing.assert_allclose(shared.entropy(), each.entropy(), rtol=1e-6)
  assert shared.batch_shape == each.batch_shape == (4, 2)


def test_masked_logits_are_finite_and_exclude():
  logits = masked_logits(tf.zeros([2, 3]), tf.constant([[True, False, True]] * 2))
  assert logits.numpy()[0, 1] == MASKED_LOGIT


def test_hierarchical_pins_only_the_restricted_groups():
  n = 4
  obs_spec, act_spec = specs(UNITS, {"groups": ((UNITS,), n + DEVICES),
                                     "devices": ((n,), DEVICES)})
  net = HierarchicalNetwork(obs_spec, act_spec, features(UNITS), hidden=8,
                            grouper_hidden=8)
  per_sample = HierarchicalNetwork(obs_spec, act_spec, features(UNITS),
                                   hidden=8, grouper_hidden=8,
                                   shared_logits=False)
  assert per_sample(allowed((3,), UNITS))[0]["groups"].batch_shape == (3,)
  dists, _ = net(allowed((3,), UNITS))
  assert dists["groups"].event_shape == (UNITS,)
  assert dists["devices"].event_shape == (n,)
  groups = dists["groups"].sample(100).numpy()  # [100, 3, U]
  restricted = groups[..., 1]
  assert np.all((restricted >= n) & (restricted != n + 2))  # Pinned, not 2.
  free = np.delete(groups, 1, axis=-1)
  assert np.all(free < n)


def test_value_network_gives_one_value_per_entry():
  obs_spec, _ = specs(UNITS, ((UNITS,), DEVICES))
  value, _ = GraphValueNetwork(obs_spec, features(UNITS))(allowed((2, 3),
                                                                  UNITS))
  assert value.shape == (2, 3)
  assert np.all(value.numpy() == value.numpy()[0, 0])
