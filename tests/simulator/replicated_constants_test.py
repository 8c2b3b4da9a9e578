"""Small constants TF copies to their consumers' devices (no transfer)."""

import numpy as np
import pytest

import tfplace  # noqa: F401
from tfplace.cost.cluster import Device, make_cluster
from tfplace.cost.op_costs import OpCosts
from tfplace.cost.presets import cpu_cluster
from tfplace.graph.op_graph import Edge, Op, OpGraph
from tfplace.simulator.replicated_constants import (host_devices,
                                                    replicable_constants)
from tfplace.simulator.simulator import Simulator


def const_graph(elements=2, consumers=2, control_out=False,
                const_type="Const"):
  """Op 0, a constant of `elements` floats, read by ops 1..consumers."""
  ops = [Op(name="c", type=const_type, output_shapes=((elements,),),
            output_bytes=(4 * elements,))]
  ops += [Op(name=f"use{i}", type="Mul", output_shapes=((1,),),
             output_bytes=(4,)) for i in range(1, consumers + 1)]
  edges = [Edge(0, i, 0, 4 * elements) for i in range(1, consumers + 1)]
  if control_out:
    ops.append(Op(name="after", type="NoOp"))
    edges.append(Edge(0, len(ops) - 1, -1, 0))
  return OpGraph(ops, edges, graph_def=None, name="consts")


def transfers(graph, cluster, ids):
  m, d = graph.num_ops, cluster.num_devices
  costs = OpCosts(compute_s=np.full((m, d), 1e-3),
                  param_bytes=np.zeros(m, np.int64),
                  output_bytes=np.array([sum(op.output_bytes)
                                         for op in graph.ops], np.int64))
  simulator = Simulator(graph, cluster, costs)
  result = simulator.simulate(np.array(ids), True)
  assert simulator.simulate(np.array(ids)).num_transfers == len(
      result.transfers)
  return sorted((t.src_device, t.dst_device) for t in result.transfers)


def test_a_small_constant_read_on_two_cpus_is_not_sent():
  cluster = cpu_cluster(3)
  assert transfers(const_graph(), cluster, [0, 1, 2]) == []
  # Its own device is one of the two hosts.
  assert transfers(const_graph(), cluster, [0, 0, 1]) == []


def test_a_constant_read_on_one_other_device_is_sent_once():
  cluster = cpu_cluster(2)
  assert transfers(const_graph(), cluster, [0, 1, 1]) == [(0, 1)]


@pytest.mark.parametrize("graph", [
    const_graph(elements=17),  # too large
    const_graph(control_out=True),  # a control successor
])
def test_a_constant_tf_does_not_copy_is_sent_to_each_device(graph):
  ids = [0, 1, 2] + [0] * (graph.num_ops - 3)
  assert transfers(graph, cpu_cluster(3), ids) == [(0, 1), (0, 2)]


def test_a_constant_read_once_is_not_copied():
  graph = const_graph(consumers=1)
  assert not replicable_constants(graph, np.ones(2, bool)).any()
  assert transfers(graph, cpu_cluster(2), [0, 1]) == [(0, 1)]


def test_edges_outside_the_step_do_not_count():
  graph = const_graph()
  step = np.array([True, True, False])
  assert not replicable_constants(graph, step).any()
  assert replicable_constants(graph, np.ones(3, bool)).tolist() == [
      True, False, False]


def two_tasks():
  """task 0: CPU:0 and GPU:0; task 1: CPU:0."""
  def dev(name, kind):
    return Device(name, kind, 1e12, 1e11, 8e9, 5e-6, 1)
  return make_cluster("two_tasks", [
      dev("/job:worker/replica:0/task:0/device:CPU:0", "CPU"),
      dev("/job:worker/replica:0/task:0/device:GPU:0", "GPU"),
      dev("/job:worker/replica:0/task:1/device:CPU:0", "CPU")])


def test_hosts_of_accelerators_are_their_tasks_cpus():
  cluster = two_tasks()
  hosts = host_devices(cluster.device_names,
                       [d.type for d in cluster.devices])
  assert hosts.tolist() == [0, 0, 2]
  alone = host_devices(["/job:w/replica:0/task:3/device:GPU:0"], ["GPU"])
  assert alone.tolist() == [-1]


def test_an_accelerator_on_the_constants_host_still_receives_it():
  cluster = two_tasks()
  # GPU:0 shares task 0's host with the constant: one host, sent.
  assert transfers(const_graph(), cluster, [0, 1, 0]) == [(0, 1)]
  # With task 1 reading too, task 1's CPU reads a copy; the GPU, on the
  # constant's own host, still receives it from the CPU.
  assert transfers(const_graph(), cluster, [0, 1, 2]) == [(0, 1)]


def test_a_constant_on_an_accelerator_is_sent():
  cluster = two_tasks()
  assert transfers(const_graph(), cluster, [1, 0, 2]) == [(1, 0), (1, 2)]
