"""The fetched loss travels to the client's device on a server cluster."""

import dataclasses

import numpy as np
import pytest

import tfplace  # noqa: F401
from tfplace.cost.op_costs import OpCosts
from tfplace.cost.presets import cpu_cluster
from tfplace.graph.op_graph import Edge, Op, OpGraph, StepFetches
from tfplace.simulator.simulator import Simulator


def step_graph(loss="loss:0"):
  """x (1 s) -> loss (1 s) -> train (1 s); the loss's output is 100 B."""
  ops = [Op(name=n, type="MatMul", output_bytes=(100,))
         for n in ("x", "loss", "train")]
  edges = [Edge(0, 1, 0, 100), Edge(1, 2, 0, 100)]
  return OpGraph(ops, edges, graph_def=None, name="fetch",
                 fetches=StepFetches(train_ops=("train",), loss=loss))


def simulate(graph, rendezvous, ids):
  cluster = dataclasses.replace(
      cpu_cluster(2, latency_s=0.5, bandwidth=100.0),
      rendezvous_transfers=rendezvous)
  costs = OpCosts(compute_s=np.ones((3, 2)), param_bytes=np.zeros(3, int),
                  output_bytes=np.full(3, 100))
  simulator = Simulator(graph, cluster, costs)
  return simulator.simulate(np.array(ids), True), simulator


def test_a_loss_on_another_worker_is_sent_to_the_first_cpu():
  # All on device 1: after train (3 s) device 1 sends the loss's 100 B
  # (1 s at 100 B/s) and it arrives at 4.5 s (0.5 s latency).
  result, simulator = simulate(step_graph(), True, [1, 1, 1])
  (t,) = result.transfers
  assert (t.producer, t.src_device, t.dst_device) == (1, 1, 0)
  assert result.step_time_s == pytest.approx(4.5)
  assert simulator.simulate(np.array([1, 1, 1])).step_time_s == (
      pytest.approx(4.5))
  assert simulator.simulate_batch(np.array([[1, 1, 1]]))[0] == (
      pytest.approx(4.5))


@pytest.mark.parametrize("graph,rendezvous,ids", [
    (step_graph(), True, [0, 0, 0]),  # already on the client's device
    (step_graph(loss=None), True, [1, 1, 1]),  # nothing fetched
    (step_graph(), False, [1, 1, 1])])  # in process: not modelled
def test_no_fetch_message(graph, rendezvous, ids):
  result, _ = simulate(graph, rendezvous, ids)
  assert not result.transfers and result.step_time_s == pytest.approx(3.0)
