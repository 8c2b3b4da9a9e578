"""Constants are resident: TF's Const kernel holds its tensor for the
session's life, so the simulator holds it all step, as a variable."""

import numpy as np
import pytest
import tensorflow as tf

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.cost.analytical import AnalyticalCostModel
from tfplace.graph.importers import import_graph
from tfplace.placement import Placement
from tfplace.simulator.simulator import Simulator

V1 = tf.compat.v1
N = 64 * 1024  # float32 values: 256 KiB a tensor.


def _constant_read_early():
  """A 256 KiB constant summed; then a 256 KiB tensor filled with the sum,
  summed into the loss. The constant's one reader ends before the filled
  tensor exists (one op makes it: no buffer TF could reuse in place)."""
  graph = tf.Graph()
  with graph.as_default():
    table = tf.constant(np.ones(N, np.float32), name="table")
    total = tf.reduce_sum(table, name="total")
    tf.reduce_sum(tf.fill([N], total, name="filled"), name="loss")
  return import_graph(graph, train_ops=["loss"], loss="loss")


def test_a_constant_is_held_all_step():
  graph = _constant_read_early()
  i = graph.index["table"]
  assert graph.resident_bytes[i] == 4 * N and graph.activation_bytes[i] == 0


def test_simulated_peak_holds_the_constant_as_tf_does():
  from tfplace.measurement.config import MeasureConfig
  from tfplace.measurement.local_cluster import LocalCluster
  from tfplace.measurement.runner import measure
  graph = _constant_read_early()
  with LocalCluster(num_workers=1, cores_per_worker=1) as lc:
    cluster = lc.to_cluster()
    device = cluster.device_names[0]
    placement = Placement({op.name: device for op in graph.ops})
    timing = measure(graph, placement,
                     MeasureConfig(target=lc.target, warmup=1, steps=1,
                                   timeout_s=120), cluster=cluster)
  simulated = Simulator(graph, cluster, AnalyticalCostModel().op_costs(
      graph, cluster)).simulate(np.zeros(graph.num_ops, np.int32))
  measured = timing.peak_memory_bytes[device]
  # The constant and the filled tensor: 512 KiB (256 KiB with the constant
  # freed after its sum, as the simulator had it).
  assert simulated.peak_memory_bytes[0] >= 2 * 4 * N
  assert measured == pytest.approx(simulated.peak_memory_bytes[0], rel=0.05)
