"""Placeto's networks: message passing, summaries, inputs, masked head."""

import tfplace  # noqa: F401  (before TensorFlow)

import numpy as np
import pytest
import tensorflow as tf

from tfplace.rl.networks.graph_embedding import (mean_adjacency,
                                                 pooled_summaries, propagate)
from tfplace.rl.networks.placeto_inputs import (PlacetoInputs, flatten_outer,
                                                scaled_time)
from tfplace.rl.placeto_builder import ProgressiveConfig, placeto_setup
from tfplace.rl.progressive_graph import build_progressive_graph


def test_messages_average_the_predecessors():
  # Edges 0 -> 2 and 1 -> 2: node 2 averages nodes 0 and 1.
  adjacency = mean_adjacency(3, rows=[2, 2], cols=[0, 1])
  x = tf.constant([[[2.0]], [[4.0]], [[8.0]]])  # [G=3, N=1, H=1]
  np.testing.assert_allclose(propagate(adjacency, x)[:, 0, 0], [0, 0, 3])


def test_summaries_are_means_over_each_set():
  embeddings = tf.constant([[[1.0]], [[3.0]], [[5.0]]])  # [G, N=1, H=1]
  masks = tf.constant([[[1.0, 1.0, 0.0]], [[0.0, 0.0, 0.0]],
                       [[0.0, 1.0, 1.0]]])  # K = 3 sets.
  np.testing.assert_allclose(pooled_summaries(embeddings, masks), [[2, 0, 4]])


def setup_for(problem, start, **kwargs):
  config = ProgressiveConfig(batch_size=2, hidden=8, **kwargs)
  start = np.asarray(start, np.int32)
  return placeto_setup(problem, start,
                       float(problem.simulate_groups(start[None])[0]), config)


def observation(setup, steps=()):
  """The first observation, then after `steps` (batched actions)."""
  time_step = setup.env.reset()
  for action in steps:
    time_step = setup.env.step(np.asarray(action, np.int32))
  return tf.nest.map_structure(tf.constant, time_step.observation)


def test_device_features_by_hand(two_groups):
  # a, b: 10 s on device 0, 1 s on device 1; both on 0: 20 s.
  setup = setup_for(two_groups, [0, 0])
  # Each group is its own unit: the view of the colocation groups is the
  # network's.
  inputs = PlacetoInputs(build_progressive_graph(two_groups.graph,
                                                 two_groups.groups, 20.0))
  flat, _ = flatten_outer(observation(setup))
  features = inputs.device_features(flat).numpy()[0]  # Placing a, [D, 6].
  half, tenth = scaled_time(0.5).numpy(), scaled_time(0.05).numpy()
  np.testing.assert_allclose(features[:, 0], [half, tenth], rtol=1e-6)
  np.testing.assert_allclose(features[:, 1], [half, 0.0], rtol=1e-6)  # b.
  np.testing.assert_allclose(features[:, 2], [1.0, 0.0], rtol=1e-6)
  np.testing.assert_allclose(features[:, 3:5], 0.0)  # No edges.
  np.testing.assert_allclose(features[:, 5], [1.0, 0.0])  # a is on 0.
  nodes = inputs.node_features(flat).numpy()  # [G, N, F]
  visited, current = nodes[:, 0, -4], nodes[:, 0, -3]
  assert visited.tolist() == [0, 0] and current.tolist() == [1, 0]
  np.testing.assert_allclose(nodes[:, 0, -2], [0.0, 0.5])  # b starts later.


def test_masked_device_has_probability_zero(chains):
  setup = setup_for(chains, np.zeros(chains.groups.num_groups))
  order = setup.env.order.tolist()
  steps = [[0, 0]] * order.index(1)  # Up to the step placing group 1.
  dist, _ = setup.actor_net(observation(setup, steps))
  probs = tf.nn.softmax(dist.logits).numpy()
  assert probs.shape == (2, 3)
  np.testing.assert_array_equal(probs[:, 1], 0.0)  # No kernel on 1.
  np.testing.assert_allclose(probs.sum(axis=-1), 1.0, rtol=1e-6)
  samples = dist.sample(200).numpy()
  assert not np.any(samples == 1)


def test_time_batches_and_the_value_network(chains):
  setup = setup_for(chains, np.zeros(chains.groups.num_groups))
  obs = observation(setup)
  stacked = tf.nest.map_structure(lambda x: tf.stack([x, x, x], axis=1), obs)
  dist, _ = setup.actor_net(stacked)
  assert dist.logits.shape == (2, 3, 3)
  value, _ = setup.value_net(stacked)
  assert value.shape == (2, 3)


def test_stay_probability(two_groups):
  setup = setup_for(two_groups, [0, 0])
  setup.actor_net.set_stay_probability(0.9)
  dist, _ = setup.actor_net(observation(setup))
  probs = tf.nn.softmax(dist.logits).numpy()
  np.testing.assert_allclose(probs[:, 0], 0.9, atol=0.02)  # a is on 0.
