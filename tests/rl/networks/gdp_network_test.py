"""GDP's network: GraphSAGE's reach, the segments' memory, the output head."""

import tfplace  # noqa: F401  (before TensorFlow)

import numpy as np
import pytest
import tensorflow as tf
from graph_network_testlib import (DEVICES, chain_edges,
                                   check_event_shape_mask_and_batch, specs)

from tfplace.rl.networks.gdp_network import GDPNetwork
from tfplace.rl.networks.graphsage import GraphSage, undirected_pairs
from tfplace.rl.networks.segment_attention import SegmentAttention


def test_undirected_pairs_both_ways_without_loops_or_repeats():
  senders, receivers = undirected_pairs(3, np.array([0, 0, 1, 2]),
                                        np.array([1, 1, 1, 0]))
  assert sorted(zip(senders.tolist(), receivers.tolist())) == [
      (0, 1), (0, 2), (1, 0), (2, 0)]


@pytest.mark.parametrize("layers", [1, 2])
def test_graphsage_sees_exactly_its_layers_in_hops(layers):
  n = 6
  src, dst = chain_edges(n)  # 0 - 1 - 2 - 3 - 4 - 5
  tf.keras.utils.set_random_seed(0)  # No all-zero (dead relu) embeddings.
  sage = GraphSage(n, src, dst, hidden=16, layers=layers)
  x = np.random.default_rng(0).normal(size=(n, 4)).astype(np.float32)
  before = sage(x).numpy()
  x[0] += 5.0  # Node 0 changes: nodes within `layers` hops see it.
  after = sage(x).numpy()
  moved = ~np.isclose(before, after, atol=1e-6).all(axis=1)
  assert moved.tolist() == [i <= layers for i in range(n)]
  np.testing.assert_allclose(np.linalg.norm(after, axis=1), 1.0, rtol=1e-4)
  # (An embedding all of whose units are 0 after the relu would stay 0.)


def test_graphsage_node_without_neighbours_is_embedded_alone():
  sage = GraphSage(3, np.array([0]), np.array([1]), hidden=4, layers=2)
  out = sage(np.ones((3, 2), np.float32)).numpy()
  assert np.all(np.isfinite(out))


def test_segments_read_the_previous_segment_without_its_gradient():
  n, length, hidden = 10, 4, 8  # Segments [0-3], [4-7], [8-9] (padded).
  attention = SegmentAttention(n, hidden, layers=1, heads=2,
                               segment_length=length)
  assert attention.num_segments == 3
  x = tf.constant(np.random.default_rng(1).normal(size=(n, hidden)),
                  tf.float32)
  base = attention(x).numpy()
  changed = x.numpy()
  changed[1] += 3.0  # Segment 0: segment 1 reads it (memory), 2 does not.
  out = attention(tf.constant(changed)).numpy()
  moved = ~np.isclose(base, out, atol=1e-6).all(axis=1)
  assert moved.tolist() == [True] * 8 + [False] * 2
  changed = x.numpy()
  changed[9] += 3.0  # The last segment: nothing before it moves.
  out = attention(tf.constant(changed)).numpy()
  assert np.allclose(base[:8], out[:8], atol=1e-6)
  weights = tf.constant(np.random.default_rng(2).normal(size=(4, hidden)),
                        tf.float32)  # (A layer norm's outputs sum to 0.)
  with tf.GradientTape() as tape:
    tape.watch(x)
    y = tf.reduce_sum(attention(x)[4:8] * weights)  # Segment 1's outputs.
  gradient = tape.gradient(y, x).numpy()
  assert np.all(gradient[:4] == 0) and np.any(gradient[4:8] != 0)


@pytest.mark.parametrize("shared", [True, False])
def test_gdp_network_event_shape_mask_and_batch(shared):
  n = 7
  obs_spec, act_spec = specs(n)
  src, dst = chain_edges(n)
  features = np.random.default_rng(2).normal(size=(n, 5)).astype(np.float32)
  net = GDPNetwork(obs_spec, act_spec, features, src, dst,
                   order=np.arange(n)[::-1], hidden=8, sage_layers=2,
                   attention_layers=2, heads=2, segment_length=3,
                   shared_logits=shared)
  check_event_shape_mask_and_batch(net, n)


def _network(n, hidden=8, **kwargs):
  obs_spec, act_spec = specs(n)
  src, dst = chain_edges(n)
  features = np.random.default_rng(n).normal(size=(n, 5)).astype(np.float32)
  return GDPNetwork(obs_spec, act_spec, features, src, dst, np.arange(n),
                    hidden=hidden, heads=2, segment_length=4, **kwargs)


def test_networks_of_two_graphs_share_every_weight_but_the_bias():
  first = _network(5)
  second = _network(11, share_weights_with=first)
  first.create_variables()
  second.create_variables()
  own = lambda net: {net.output_biases().raw.ref()}  # noqa: E731
  refs = lambda net: {v.ref() for v in net.trainable_variables}  # noqa: E731
  assert refs(first) - own(first) == refs(second) - own(second)
  assert len(refs(first) - own(first)) > 10
  assert own(first) != own(second)
  # A step on the second graph's logits moves the first graph's.
  before = first.network_logits(training=False).numpy()
  with tf.GradientTape() as tape:
    loss = tf.reduce_sum(second.network_logits(training=True)[:, 0])
  variables = second.trainable_variables
  tf.keras.optimizers.SGD(0.1).apply_gradients(
      zip(tape.gradient(loss, variables), variables))
  assert not np.allclose(before, first.network_logits(training=False).numpy())


def test_weights_of_other_sizes_are_not_shared():
  with pytest.raises(ValueError, match="cannot share the weights of a GDP"):
    _network(5, hidden=16, share_weights_with=_network(5))
  sage = GraphSage(4, *chain_edges(4), hidden=8, layers=2)
  with pytest.raises(ValueError, match="cannot share GraphSAGE weights"):
    GraphSage(6, *chain_edges(6), hidden=8, layers=3, share_weights_with=sage)
  attention = SegmentAttention(8, hidden=8, layers=2, heads=2)
  with pytest.raises(ValueError, match="cannot share attention weights"):
    SegmentAttention(8, hidden=8, layers=2, heads=4,
                     share_weights_with=attention)


def test_gdp_weights_do_not_depend_on_the_graph_but_the_bias():
  def weights(n):
    obs_spec, act_spec = specs(n)
    src, dst = chain_edges(n)
    net = GDPNetwork(obs_spec, act_spec, np.ones((n, 5), np.float32), src,
                     dst, np.arange(n), hidden=8, heads=2, segment_length=4)
    net.create_variables()
    bias = net.output_biases().raw
    return ([v.shape for v in net.trainable_variables if v is not bias],
            bias.shape)
  (small, small_bias), (large, large_bias) = weights(5), weights(11)
  assert small == large and len(small) > 10
  assert small_bias == (5, DEVICES) and large_bias == (11, DEVICES)
