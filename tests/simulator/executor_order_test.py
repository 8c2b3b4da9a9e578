"""The order a one-core TF server worker runs its ready ops in."""

import dataclasses

import numpy as np
import pytest

import tfplace  # noqa: F401
from tfplace.cost.op_costs import OpCosts
from tfplace.cost.presets import cpu_cluster
from tfplace.graph.op_graph import Edge, Op, OpGraph
from tfplace.simulator.simulator import INLINE_WORK_S, Simulator

# Two chains from two roots, each summed, then joined: op0 -> op1, both
# -> op2; op3 -> op4, both -> op5; op2, op5 -> op6. Every output 1000 B.
CHAINS = [(0, 1), (0, 2), (1, 2), (3, 4), (3, 5), (4, 5), (2, 6), (5, 6)]


def _graph(num_ops, edges):
  ops = [Op(name=f"op{i}", type="MatMul", output_bytes=(1000,))
         for i in range(num_ops)]
  return OpGraph(ops, [Edge(s, d, 0, 1000) for s, d in edges],
                 graph_def=None, name="chains")


def _cluster(rendezvous, slots=1):
  c = cpu_cluster(1)
  devices = tuple(dataclasses.replace(d, slots=slots, launch_overhead_s=0.0)
                  for d in c.devices)
  return dataclasses.replace(c, devices=devices,
                             rendezvous_transfers=rendezvous)


def _order(graph, cluster, seconds):
  m = graph.num_ops
  costs = OpCosts(np.asarray(seconds, dtype=np.float64)[:, None],
                  np.zeros(m, np.int64), np.full(m, 1000, np.int64))
  result = Simulator(graph, cluster, costs).simulate(
      np.zeros(m, np.int32), True)
  return [s.op for s in sorted(result.schedule, key=lambda s: s.start_s)], (
      result)


def test_a_tf_worker_runs_the_last_root_first_and_follows_its_chain():
  graph = _graph(7, CHAINS)
  order, tf_worker = _order(graph, _cluster(True), [1.0] * 7)
  # TF dispatches the step's first ops to the front of the worker's
  # queue (the last runs first); each op's one expensive successor then
  # runs inline: the chain of op3 and its sum, then op0's.
  assert order == [3, 4, 5, 0, 1, 2, 6]
  # Elsewhere (in process, or several cores): by the time ops became ready.
  order, fifo = _order(graph, _cluster(False), [1.0] * 7)
  assert order == [0, 3, 1, 4, 2, 5, 6]
  assert _order(graph, _cluster(True, slots=2), [1.0] * 7)[0][:2] in (
      [0, 3], [3, 0])
  # Same work, same step; one chain's outputs are summed and freed before
  # the other's start (RNNLM's per-step gradients: measured 1.45 GB, as
  # simulated in this order, 2.4 GB in the other).
  assert tf_worker.step_time_s == fifo.step_time_s == 7.0
  assert tf_worker.peak_memory_bytes[0] == 4000
  assert fifo.peak_memory_bytes[0] == 5000


def test_cheap_ops_run_inline_first_and_other_dispatches_run_last_first():
  # op0 -> op1, op2, op3, op4 (in edge order); op1 and op3 take less than
  # the inline threshold, op2 and op4 more. TF runs the cheap ones inline
  # in order, dispatches op2 (not the last expensive one) to the front of
  # its queue and, the inline queue being busy, op4 too: op4 then op2.
  graph = _graph(5, [(0, 1), (0, 2), (0, 3), (0, 4)])
  cheap, costly = INLINE_WORK_S / 2, 1.0
  order, _ = _order(graph, _cluster(True), [1.0, cheap, costly, cheap,
                                             costly])
  assert order == [0, 1, 3, 4, 2]
  # With no cheap successor the last expensive one runs inline at once,
  # ahead of the ones dispatched before it.
  graph = _graph(4, [(0, 1), (0, 2), (0, 3)])
  order, _ = _order(graph, _cluster(True), [1.0, costly, costly, costly])
  assert order == [0, 3, 2, 1]


def test_an_arrival_runs_after_the_workers_own_dispatches():
  # Device 1 runs op2 (a root) whose successors op3, op4 are expensive;
  # op1 (on device 1) waits for op0's message from device 0. Arrivals come
  # from another thread: they queue behind what the worker dispatched.
  ops = [Op(name=f"op{i}", type="MatMul", output_bytes=(1000,))
         for i in range(5)]
  graph = OpGraph(ops, [Edge(0, 1, 0, 100), Edge(2, 3, 0, 100),
                        Edge(2, 4, 0, 100)], graph_def=None, name="arrival")
  cluster = cpu_cluster(2, latency_s=0.0, bandwidth=1e12)
  devices = tuple(dataclasses.replace(d, launch_overhead_s=0.0)
                  for d in cluster.devices)
  cluster = dataclasses.replace(cluster, devices=devices,
                                rendezvous_transfers=True)
  costs = OpCosts(np.array([[0.5, 0.5], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0],
                            [1.0, 1.0]]), np.zeros(5, np.int64),
                  np.full(5, 1000, np.int64))
  result = Simulator(graph, cluster, costs).simulate(
      np.array([0, 1, 1, 1, 1], np.int32), True)
  start = {s.op: s.start_s for s in result.schedule}
  assert start[2] == 0.0
  assert start[4] == pytest.approx(1.0) and start[3] == pytest.approx(2.0)
  assert start[1] == pytest.approx(3.0)
