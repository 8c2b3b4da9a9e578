"""Simulator.simulate_batch_start_times: the schedule's op start times."""

import numpy as np
import pytest

import tfplace  # noqa: F401
from tfplace.cost.op_costs import OpCosts
from tfplace.cost.presets import cpu_cluster
from tfplace.graph.op_graph import Edge, Op, OpGraph
from tfplace.simulator.simulator import Simulator


def make_graph(num_ops, edges):
  """edges: (src, dst, bytes)."""
  ops = [Op(name=f"op{i}", type="MatMul", output_bytes=(100,))
         for i in range(num_ops)]
  return OpGraph(ops, [Edge(s, d, 0, b) for s, d, b in edges],
                 graph_def=None, name="tiny")


def make_costs(seconds, num_devices):
  s = np.asarray(seconds, dtype=np.float64)
  if s.ndim == 1:
    s = np.repeat(s[:, None], num_devices, axis=1)
  m = s.shape[0]
  return OpCosts(compute_s=s, param_bytes=np.zeros(m, np.int64),
                 output_bytes=np.full(m, 100, np.int64))


def test_chain_starts_and_an_infeasible_row():
  # op0 (1 s) -> op1 (2 s) -> op2 (3 s); op2 has no kernel on device 1.
  graph = make_graph(3, [(0, 1, 100), (1, 2, 100)])
  costs = make_costs([[1.0, 1.0], [2.0, 2.0], [3.0, np.inf]], 2)
  sim = Simulator(graph, cpu_cluster(2), costs)
  times, starts = sim.simulate_batch_start_times(
      np.array([[0, 0, 0], [1, 1, 1]]))
  assert times[0] == pytest.approx(6.0) and np.isinf(times[1])
  np.testing.assert_allclose(starts[0], [0.0, 1.0, 3.0])
  np.testing.assert_array_equal(starts[1], [0.0, 0.0, 0.0])


def test_agrees_with_the_recorded_schedule_and_simulate_batch():
  edges = [(0, 1, 5000), (0, 2, 5000), (1, 3, 100), (2, 3, 3000)]
  graph = make_graph(4, edges)
  costs = make_costs([1.0, 2.0, 4.0, 1.0], 2)
  sim = Simulator(graph, cpu_cluster(2, bandwidth=1e3), costs)
  ids = np.array([[0, 1, 0, 1], [0, 0, 1, 1], [1, 0, 1, 0]])
  times, starts = sim.simulate_batch_start_times(ids)
  np.testing.assert_allclose(times, sim.simulate_batch(ids))
  for row, placement in enumerate(ids):
    schedule = sim.simulate(placement, record_schedule=True).schedule
    expected = {s.op: s.start_s for s in schedule}
    np.testing.assert_allclose(starts[row], [expected[i] for i in range(4)])
