"""The name rule and the device function (traced only: one device is enough)."""

import pytest

import tfplace  # noqa: F401
import tensorflow as tf

from tfplace.apply.device_function import (PlacementDeviceFunction,
                                           check_devices_exist)
from tfplace.errors import PlacementError
from tfplace.placement import Placement

CPU = "/job:localhost/replica:0/task:0/device:CPU:{}"


@tf.function
def _inner(x):
  return tf.nn.relu(x) * 2.0


def _step(x):
  y = tf.matmul(x, x, name="mm")
  return tf.reduce_sum(_inner(y), name="total")


def _trace(devices):
  """Traces _step as tfplace.apply does: nested in a wrapper function."""
  placement = Placement(devices)
  seen = {}

  @tf.function(autograph=False)
  def wrapper(x):
    graph = tf.compat.v1.get_default_graph()
    fn = PlacementDeviceFunction(placement, graph)
    with graph.device(fn):
      out = tf.function(_step)(x)
    seen["fn"] = fn
    return out

  wrapper.get_concrete_function(tf.TensorSpec([2, 2], tf.float32))
  fn = seen["fn"]
  return fn, {op.name: op for op in fn.step_graph.get_operations()}


def test_named_ops_get_their_device_others_keep_theirs():
  fn, ops = _trace({"mm": CPU.format(1), "total": CPU.format(0),
                    "PartitionedCall": CPU.format(1)})
  assert ops["mm"].device == CPU.format(1)
  assert ops["total"].device == CPU.format(0)
  assert ops["PartitionedCall"].device == CPU.format(1)
  assert ops["Const"].device == ""          # not named: TF's placer decides
  assert sorted(fn.placed) == ["PartitionedCall", "mm", "total"]


def test_ops_of_a_nested_function_follow_their_call_op():
  # The nested body's "Relu" is not the step's op: a placement entry named
  # "Relu" must not place it (its name in the import is "PartitionedCall/Relu").
  fn, _ = _trace({"Relu": CPU.format(1), "mul": CPU.format(1)})
  assert fn.placed == []
  body = _inner.get_concrete_function(tf.TensorSpec([2, 2], tf.float32)).graph
  assert [op.device for op in body.get_operations()] == [""] * len(
      body.get_operations())


def test_a_device_tf_does_not_have_is_named():
  placement = Placement({"a": CPU.format(0), "b": CPU.format(3)})
  with pytest.raises(PlacementError, match=r"puts 1 op\(s\) on "
                     r"/job:localhost/replica:0/task:0/device:CPU:3, which "
                     "this TensorFlow runtime does not have"):
    check_devices_exist(placement, available={CPU.format(0)})
  check_devices_exist(Placement({"a": CPU.format(0)}))  # CPU:0 exists here
