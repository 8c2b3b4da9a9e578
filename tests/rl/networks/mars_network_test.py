"""Mars's network: the GCN's reach, the segments' carried state, the head."""

import tfplace  # noqa: F401  (before TensorFlow)

import numpy as np
import pytest
import tensorflow as tf
from graph_network_testlib import (DEVICES, chain_edges,
                                   check_event_shape_mask_and_batch, specs)

from tfplace.rl.networks.gcn import GraphConvolution, normalized_adjacency
from tfplace.rl.networks.mars_network import MarsNetwork
from tfplace.rl.networks.segment_seq2seq import SegmentSeq2Seq


def test_normalized_adjacency_of_a_chain():
  dense = tf.sparse.to_dense(normalized_adjacency(3, *chain_edges(3))).numpy()
  # Degrees with self-loops: 2, 3, 2.
  third, sixth = 1 / 3, 1 / np.sqrt(6)
  np.testing.assert_allclose(dense, [[0.5, sixth, 0], [sixth, third, sixth],
                                     [0, sixth, 0.5]], rtol=1e-6)


@pytest.mark.parametrize("layers", [1, 2])
def test_gcn_sees_exactly_its_layers_in_hops(layers):
  n = 6
  tf.keras.utils.set_random_seed(0)
  gcn = GraphConvolution(n, *chain_edges(n), hidden=8, layers=layers)
  x = np.random.default_rng(0).normal(size=(n, 4)).astype(np.float32)
  before = gcn(x).numpy()
  x[0] += 5.0
  moved = ~np.isclose(before, gcn(x).numpy(), atol=1e-6).all(axis=1)
  assert moved.tolist() == [i <= layers for i in range(n)]


def test_segments_carry_state_forward_only():
  n, length = 10, 4  # Segments [0-3], [4-7], [8-9] (the last padded).
  tf.keras.utils.set_random_seed(1)
  placer = SegmentSeq2Seq(DEVICES, hidden=8, segment_length=length)
  x = np.random.default_rng(1).normal(size=(1, n, 5)).astype(np.float32)
  base = placer(tf.constant(x)).numpy()[0]
  assert base.shape == (n, DEVICES)

  def moved(position):
    changed = x.copy()
    changed[0, position] += 3.0
    out = placer(tf.constant(changed)).numpy()[0]
    return (~np.isclose(base, out, atol=1e-6).all(axis=1)).tolist()

  # A unit is seen by its whole segment (attention) and every later one.
  assert moved(3) == [True] * n
  assert moved(5) == [False] * 4 + [True] * 6
  assert moved(9) == [False] * 8 + [True] * 2
  one = SegmentSeq2Seq(DEVICES, hidden=8, segment_length=32)  # One segment.
  assert one(tf.constant(x)).shape == (1, n, DEVICES)


@pytest.mark.parametrize("shared", [True, False])
def test_mars_network_event_shape_mask_and_batch(shared):
  n = 7
  obs_spec, act_spec = specs(n)
  features = np.random.default_rng(2).normal(size=(n, 5)).astype(np.float32)
  net = MarsNetwork(obs_spec, act_spec, features, *chain_edges(n),
                    order=np.arange(n)[::-1], hidden=8, gcn_layers=2,
                    segment_length=3, shared_logits=shared)
  check_event_shape_mask_and_batch(net, n)
  # The encoder is trained with the placer.
  encoder = {id(v) for v in net.encoder.trainable_variables}
  assert encoder and encoder <= {id(v) for v in net.trainable_variables}
