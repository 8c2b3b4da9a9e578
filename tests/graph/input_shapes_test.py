"""Tests for placeholder shapes set before import (batch size, input
shapes): costs follow the batch, and bad shapes are refused."""

import numpy as np
import pytest
import tensorflow as tf

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.errors import GraphImportError
from tfplace.graph import input_shapes
from tfplace.graph.importers import import_graph

V1 = tf.compat.v1


def _graph():
  """x float32 [?, 6] @ w [6, 8] -> loss; labels int32 [?] unused by x."""
  graph = tf.Graph()
  with graph.as_default():
    x = V1.placeholder(tf.float32, [None, 6], name="x")
    V1.placeholder(tf.int32, [None, None], name="ids")
    w = V1.get_variable("w", [6, 8], use_resource=True)
    loss = tf.reduce_mean(tf.matmul(x, w), name="loss")
    V1.train.GradientDescentOptimizer(0.1).minimize(loss, name="train")
  return graph


def _shape(graph_def, name):
  node = next(n for n in graph_def.node if n.name == name)
  return input_shapes.declared_shape(node)


def test_batch_size_sets_the_first_unknown_dimension_only():
  graph_def = _graph().as_graph_def()
  shaped = input_shapes.set_input_shapes(graph_def, batch_size=32)
  assert _shape(shaped, "x") == (32, 6)
  assert _shape(shaped, "ids") == (32, None)
  assert _shape(graph_def, "x") == (None, 6)  # the input is not changed
  given = input_shapes.set_input_shapes(graph_def, batch_size=32,
                                        input_shapes={"ids": (4, 3)})
  assert _shape(given, "ids") == (4, 3) and _shape(given, "x") == (32, 6)
  assert input_shapes.set_input_shapes(graph_def) is graph_def


def test_costs_follow_the_batch_size():
  graph = _graph()
  small = import_graph(graph, batch_size=2)
  large = import_graph(graph, batch_size=64)
  matmul = small.index["MatMul"]
  assert small.ops[matmul].output_shapes[0] == (2, 8)
  assert large.ops[matmul].output_shapes[0] == (64, 8)
  # 2*B*6*8 FLOPs in the forward MatMul.
  assert large.ops[matmul].flops == pytest.approx(
      32 * small.ops[matmul].flops)
  assert _shape(large.graph_def, "x") == (64, 6)
  # The train op is still found when the graph is re-read from its GraphDef.
  assert large.fetches.train_ops == small.fetches.train_ops
  assert np.array_equal(large.group_of, small.group_of)


def test_bad_shapes_are_refused():
  graph_def = _graph().as_graph_def()
  for kwargs, message in (
      (dict(batch_size=0), "batch_size must be >= 1"),
      (dict(input_shapes={"x": (4, 7)}), r"does not fit its declared shape "
       r"\[\?, 6\]"),
      (dict(input_shapes={"x": (4,)}), "does not fit"),
      (dict(input_shapes={"w": (6, 8)}), r"not placeholders .*'ids', 'x'")):
    with pytest.raises(GraphImportError, match=message):
      input_shapes.set_input_shapes(graph_def, **kwargs)


def test_parse_input_shapes():
  assert input_shapes.parse_input_shapes(["images=32x28x28x1", "step="]) == {
      "images": (32, 28, 28, 1), "step": ()}
  for bad in ("images", "images=32xa", "=3", "x=-1"):
    with pytest.raises(GraphImportError, match="--input_shapes"):
      input_shapes.parse_input_shapes([bad])


def test_a_batch_norms_training_step_has_no_unknown_dimension(monkeypatch):
  # FusedBatchNormV3's reserve_space_3 has no static shape, nor has the
  # gradient's ZerosLike of it: every Keras batch or layer normalization
  # warned of unknown dimensions. Both are the CPU kernel's scalar.
  from tfplace.graph import unknown_dims
  graph = tf.Graph()
  with graph.as_default():
    x = tf.random.normal([4, 3, 5, 5])
    scale = V1.get_variable("scale", [3], use_resource=True)
    y, _, _ = V1.nn.fused_batch_norm(x, scale, tf.zeros([3]),
                                     data_format="NCHW")
    loss = tf.reduce_sum(y, name="loss")
    V1.train.GradientDescentOptimizer(0.1).minimize(loss, name="train")
  monkeypatch.setattr(unknown_dims, "_warned", [False])
  imported = import_graph(graph, train_ops=["train"], loss="loss")
  assert unknown_dims._warned == [False]
  sources = {n.name: n.input[0] for n in imported.graph_def.node
             if n.op == "ZerosLike"}
  (of_reserve,) = [name for name, source in sources.items()
                   if source.endswith("FusedBatchNormV3:5")]
  op = imported.ops[imported.index[of_reserve]]
  assert op.output_shapes == ((),) and op.output_bytes == (4,)
