"""Lower bound: critical path and work bound, worked by hand."""

import numpy as np
import pytest

import tfplace  # noqa: F401
from tfplace.simulator.lower_bound import lower_bound, work_bound
from tfplace.cost.op_costs import OpCosts
from tfplace.cost.presets import cpu_cluster
from tfplace.graph.op_graph import Edge, Op, OpGraph


def graph(num_ops, edges):
  ops = [Op(name=f"op{i}", type="MatMul") for i in range(num_ops)]
  return OpGraph(ops, [Edge(s, d, 0, 8) for s, d in edges], graph_def=None)


def costs(seconds):
  s = np.asarray(seconds, dtype=np.float64)
  m = s.shape[0]
  return OpCosts(s, np.zeros(m, np.int64), np.zeros(m, np.int64))


def test_chain_bound_is_its_fastest_path():
  g = graph(3, [(0, 1), (1, 2)])
  c = costs([[1.0, 2.0], [3.0, 1.0], [2.0, 2.0]])
  # Fastest per op: 1 + 1 + 2.
  assert lower_bound(g, cpu_cluster(2), c) == pytest.approx(4.0)


def test_independent_ops_bound_is_work_over_devices():
  g = graph(4, [])
  c = costs(np.ones((4, 2)))
  assert lower_bound(g, cpu_cluster(2), c) == pytest.approx(2.0)


def test_heterogeneous_work_bound_uses_aggregate_speed():
  # Device 0 is twice as fast. Best split: 4 ops on device 0 (4 s) and 2 on
  # device 1 (4 s): T = 4, above work/D = 6/2 = 3.
  g = graph(6, [])
  c = costs(np.tile([1.0, 2.0], (6, 1)))
  assert work_bound(c, cpu_cluster(2)) == pytest.approx(4.0)
  assert lower_bound(g, cpu_cluster(2), c) == pytest.approx(4.0)


def test_slots_count_as_capacity():
  g = graph(4, [])
  c = costs(np.ones((4, 1)))
  assert lower_bound(g, cpu_cluster(1, slots=4), c) == pytest.approx(1.0)
  assert lower_bound(g, cpu_cluster(1, slots=2), c) == pytest.approx(2.0)


def test_ops_without_kernel_somewhere_use_their_fastest_device():
  g = graph(2, [(0, 1)])
  c = costs([[np.inf, 3.0], [1.0, np.inf]])
  assert lower_bound(g, cpu_cluster(2), c) == pytest.approx(4.0)
