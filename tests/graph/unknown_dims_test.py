"""Tests for the unknown-dimension warning: given where the training step
has an unknown dimension, not where a batch size resolved them all, nor for
ops outside the step."""

import numpy as np
import pytest
import tensorflow as tf

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.graph import unknown_dims
from tfplace.graph.importers import import_graph

V1 = tf.compat.v1


@pytest.fixture(name="warnings")
def _warnings(monkeypatch):
  """The unknown-dimension warnings' first named tensor, each time."""
  seen = []
  monkeypatch.setattr(unknown_dims, "_warned", [False])
  monkeypatch.setattr(unknown_dims.logging, "warning",
                      lambda message, first: seen.append(first))
  return seen


def _tf1_step(x_shape, bias_shape, saver: bool = False) -> tf.Graph:
  """x (x_shape, batch unknown) - b (bias_shape) -> loss, as a TF1 graph;
  where b has the batch dimension, the gradient of `-` broadcasts with
  BroadcastGradientArgs on the shapes, not known when it was built."""
  graph = tf.Graph()
  with graph.as_default():
    x = V1.placeholder(tf.float32, x_shape, name="x")
    b = V1.get_variable("b", bias_shape)
    loss = tf.reduce_mean(tf.square(x - b), name="loss")
    V1.train.GradientDescentOptimizer(0.1).minimize(loss, name="train")
    if saver:
      V1.train.Saver()
  return graph


def _reduction_lengths(s0, s1):
  """The output shapes TF's own kernel gives for these input shapes."""
  r0, r1 = tf.raw_ops.BroadcastGradientArgs(s0=s0, s1=s1)
  return (len(r0.numpy()),), (len(r1.numpy()),)


@pytest.mark.parametrize("x_shape,bias_shape", [
    ([None, 10], [64, 10]), ([None, 10], [64, 1]), ([None, 1], [64, 1]),
    ([None, 3, 10], [64, 1, 10])])
def test_a_batch_size_resolves_broadcast_gradient_args(x_shape, bias_shape,
                                                       warnings):
  graph = import_graph(_tf1_step(x_shape, bias_shape).as_graph_def(),
                       train_ops="train", loss="loss", batch_size=64)
  assert warnings == []
  (bcast,) = [op for op in graph.ops if op.type == "BroadcastGradientArgs"]
  assert bcast.output_shapes == _reduction_lengths([64] + x_shape[1:],
                                                   bias_shape)
  assert bcast.output_bytes == tuple(4 * s[0] for s in bcast.output_shapes)


@pytest.mark.parametrize("s0,s1", [([2, 1, 3], [3]), ([1, 1], [1]), ([], [4]),
                                   ([5, 4], [5, 4]), ([1], [7, 1, 1]),
                                   ([3, 1], [3, 1]), ([2, 1], [1, 1])])
def test_broadcast_reduction_shape_is_tfs(s0, s1):
  from tfplace.graph import op_reader
  graph = tf.Graph()
  with graph.as_default():
    r0, r1 = tf.raw_ops.BroadcastGradientArgs(
        s0=tf.constant(s0, tf.int32, [len(s0)]),
        s1=tf.constant(s1, tf.int32, [len(s1)]))
  assert (op_reader._tensor_shape(r0, 1),
          op_reader._tensor_shape(r1, 1)) == _reduction_lengths(s0, s1)


def test_an_unknown_batch_still_warns(warnings):
  import_graph(_tf1_step([None, 10], [64, 10]).as_graph_def(),
               train_ops="train", loss="loss")
  assert len(warnings) == 1 and "(Placeholder)" in warnings[0]


def test_ops_outside_the_step_do_not_warn(warnings):
  # A Saver's RestoreV2 has outputs of unknown shape, but a step runs none.
  step = _tf1_step([None, 10], [8, 10], saver=True)
  graph = import_graph(step.as_graph_def(), train_ops="train", loss="loss",
                       batch_size=8)
  assert any(op.type == "RestoreV2" for op in graph.ops)
  assert warnings == []


def test_a_warning_outside_an_import_is_given_at_once(warnings):
  from tfplace.graph import op_reader
  assert op_reader.resolve_shape(tf.TensorShape([None, 3]), 7) == (7, 3)
  assert warnings == [""]
  np.testing.assert_equal(unknown_dims._warned, [True])
