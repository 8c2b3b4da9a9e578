"""Hand-worked simulator cases on tiny graphs with explicit op costs."""

import numpy as np
import pytest

import tfplace  # noqa: F401
from tfplace.simulator.lower_bound import lower_bound
from tfplace.cost.op_costs import OpCosts
from tfplace.cost.presets import cpu_cluster
from tfplace.simulator.simulator import Simulator
from tfplace.errors import PlacementError
from tfplace.graph.op_graph import Edge, Op, OpGraph


def make_graph(num_ops, edges, out_bytes=None, kernels=None):
  """edges: (src, dst, bytes[, src_output]); bytes -1 = control edge."""
  out_bytes = out_bytes or [(100,)] * num_ops
  ops = [Op(name=f"op{i}", type="MatMul", output_bytes=tuple(out_bytes[i]),
            kernels=(kernels or {}).get(i, frozenset({"CPU", "GPU"})))
         for i in range(num_ops)]
  es = [Edge(e[0], e[1], -1 if e[2] < 0 else (e[3] if len(e) > 3 else 0),
             max(e[2], 0)) for e in edges]
  return OpGraph(ops, es, graph_def=None, name="tiny")


def make_costs(seconds, num_devices, params=None, out=None):
  s = np.asarray(seconds, dtype=np.float64)
  if s.ndim == 1:
    s = np.repeat(s[:, None], num_devices, axis=1)
  m = s.shape[0]
  return OpCosts(compute_s=s,
                 param_bytes=np.asarray(params or [0] * m, dtype=np.int64),
                 output_bytes=np.asarray(out or [100] * m, dtype=np.int64))


def run(graph, cluster, costs, ids, schedule=False):
  return Simulator(graph, cluster, costs).simulate(np.array(ids), schedule)


def test_chain_on_one_device_is_sum_of_costs():
  g = make_graph(3, [(0, 1, 100), (1, 2, 100)])
  c = cpu_cluster(2)
  costs = make_costs([1.0, 2.0, 3.0], 2)
  r = run(g, c, costs, [0, 0, 0])
  assert r.feasible and r.step_time_s == pytest.approx(6.0)
  np.testing.assert_allclose(r.device_busy_s, [6.0, 0.0])
  assert r.bytes_moved == 0
  # Outputs of op0 and op1 live together while op1 runs: peak 200 bytes.
  np.testing.assert_array_equal(r.peak_memory_bytes, [200, 0])
  assert lower_bound(g, c, costs) == pytest.approx(6.0)


def test_two_independent_chains_on_two_devices_take_the_max():
  g = make_graph(4, [(0, 1, 100), (2, 3, 100)])
  c = cpu_cluster(2)
  costs = make_costs([1.0, 2.0, 4.0, 1.0], 2)
  assert run(g, c, costs, [0, 0, 1, 1]).step_time_s == pytest.approx(5.0)
  assert run(g, c, costs, [0, 0, 0, 0]).step_time_s == pytest.approx(8.0)
  # Critical path 5; work 8 / 2 devices = 4.
  assert lower_bound(g, c, costs) == pytest.approx(5.0)


def test_fork_whose_transfer_dominates():
  # op0 -> op1 (same device), op0 -> op2 (remote): 1000 B over a link of
  # 0.5 s latency and 100 B/s: 0.5 + 10 = 10.5 s.
  g = make_graph(3, [(0, 1, 1000), (0, 2, 1000)], out_bytes=[(1000,)] * 3)
  c = cpu_cluster(2, latency_s=0.5, bandwidth=100.0)
  costs = make_costs([1.0, 1.0, 1.0], 2)
  r = run(g, c, costs, [0, 0, 1], schedule=True)
  assert r.step_time_s == pytest.approx(1.0 + 10.5 + 1.0)
  assert r.bytes_moved == 1000
  (t,) = r.transfers
  assert (t.producer, t.src_device, t.dst_device) == (0, 0, 1)
  assert (t.start_s, t.end_s) == pytest.approx((1.0, 11.5))
  # The bound ignores transfers: critical path 2, work 3 / 2.
  assert lower_bound(g, c, costs) == pytest.approx(2.0)
  assert run(g, c, costs, [0, 0, 0]).step_time_s == pytest.approx(3.0)


def test_tensor_read_by_two_ops_on_one_remote_device_is_sent_once():
  g = make_graph(3, [(0, 1, 1000), (0, 2, 1000)], out_bytes=[(1000,)] * 3)
  c = cpu_cluster(2, latency_s=0.5, bandwidth=100.0)
  costs = make_costs([1.0, 1.0, 1.0], 2)
  r = run(g, c, costs, [0, 1, 1], schedule=True)
  assert r.bytes_moved == 1000 and len(r.transfers) == 1
  # Arrives at 11.5; op1 11.5-12.5, then op2 12.5-13.5 (one slot).
  assert r.step_time_s == pytest.approx(13.5)
  # The received copy (1000 B) lives on device 1 until op2 ends, beside op1's
  # output (100 B, freed when op1 ends: nothing reads it), then op2's.
  assert r.peak_memory_bytes[1] == 1100


def test_two_tensors_on_one_link_are_sent_one_after_the_other():
  g = make_graph(3, [(0, 1, 1000, 0), (0, 2, 1000, 1)],
                 out_bytes=[(1000, 1000), (1,), (1,)])
  c = cpu_cluster(2, latency_s=0.5, bandwidth=100.0)
  costs = make_costs([1.0, 1.0, 1.0], 2)
  r = run(g, c, costs, [0, 1, 1], schedule=True)
  times = [x for t in r.transfers for x in (t.start_s, t.end_s)]
  assert times == pytest.approx([1.0, 11.5, 11.5, 22.0])
  assert r.step_time_s == pytest.approx(23.0)
  assert r.bytes_moved == 2000


def test_control_edge_orders_without_a_transfer():
  g = make_graph(2, [(0, 1, -1)])
  c = cpu_cluster(2, latency_s=0.5, bandwidth=100.0)
  r = run(g, c, make_costs([1.0, 2.0], 2), [0, 1])
  assert r.step_time_s == pytest.approx(3.0) and r.bytes_moved == 0


def test_memory_overflow_is_infeasible():
  g = make_graph(3, [(0, 1, 100), (1, 2, 100)])
  costs = make_costs([1.0, 1.0, 1.0], 2, params=[600, 0, 0],
                     out=[500, 100, 100])
  # Device 0 holds 600 param bytes + op0's 500 output bytes = 1100.
  r = run(g, cpu_cluster(2, memory_bytes=1000), costs, [0, 1, 1])
  assert not r.feasible and r.oom_devices == (0,)
  assert r.step_time_s == float("inf") and r.peak_memory_bytes[0] == 1100
  ok = run(g, cpu_cluster(2, memory_bytes=1100), costs, [0, 1, 1])
  assert ok.feasible and ok.step_time_s < float("inf")
  sim = Simulator(g, cpu_cluster(2, memory_bytes=1000), costs)
  np.testing.assert_array_equal(sim.simulate_batch(np.array(
      [[0, 1, 1], [1, 0, 0]])), [np.inf, np.inf])


def test_peak_memory_exactly_at_capacity_fits():
  g = make_graph(3, [(0, 1, 100), (1, 2, 100)])
  costs = make_costs([1.0, 1.0, 1.0], 1)
  assert run(g, cpu_cluster(1, memory_bytes=200), costs, [0, 0, 0]).feasible
  assert not run(g, cpu_cluster(1, memory_bytes=199), costs, [0, 0, 0]).feasible


@pytest.mark.parametrize("slots,expected", [(1, 3.0), (2, 2.0), (3, 1.0)])
def test_cpu_slots_run_ops_at_once(slots, expected):
  g = make_graph(3, [])
  c = cpu_cluster(1, slots=slots)
  costs = make_costs([1.0, 1.0, 1.0], 1)
  r = run(g, c, costs, [0, 0, 0])
  assert r.step_time_s == pytest.approx(expected)
  assert r.device_busy_s[0] == pytest.approx(3.0)
  # Work bound: 3 s of work over `slots` slots.
  assert lower_bound(g, c, costs) == pytest.approx(max(1.0, 3.0 / slots))


def test_ready_ties_go_in_topological_order():
  g = make_graph(3, [])
  r = run(g, cpu_cluster(1), make_costs([1.0, 2.0, 3.0], 1), [0, 0, 0], True)
  assert [s.op for s in r.schedule] == [0, 1, 2]
  assert [s.end_s for s in r.schedule] == pytest.approx([1.0, 3.0, 6.0])


def test_op_without_kernel_on_its_device_is_infeasible():
  g = make_graph(2, [(0, 1, 100)])
  costs = make_costs([[1.0, np.inf], [1.0, 1.0]], 2)
  sim = Simulator(g, cpu_cluster(2), costs)
  assert not sim.simulate(np.array([1, 0])).feasible
  expected = [np.inf, sim.simulate(np.array([0, 1])).step_time_s]
  np.testing.assert_array_equal(sim.simulate_batch(np.array([[1, 0], [0, 1]])),
                                expected)


def test_bad_device_ids_raise():
  g = make_graph(2, [(0, 1, 100)])
  sim = Simulator(g, cpu_cluster(2), make_costs([1.0, 1.0], 2))
  with pytest.raises(PlacementError):
    sim.simulate(np.array([0, 2]))
  with pytest.raises(PlacementError):
    sim.simulate(np.array([0, 0, 0]))


def test_batch_matches_single_and_bounds_hold():
  rng = np.random.default_rng(0)
  m = 40
  edges = [(int(s), d, int(rng.integers(1, 5000))) for d in range(1, m)
           for s in set(rng.integers(0, d, size=2))]
  g = make_graph(m, edges, out_bytes=[(2000,)] * m)
  c = cpu_cluster(3, latency_s=1e-3, bandwidth=1e6, memory_bytes=66000,
                  slots=2)
  costs = make_costs(rng.uniform(0.001, 0.01, size=(m, 3)), 3,
                     params=list(rng.integers(0, 4000, size=m)), out=[2000] * m)
  sim = Simulator(g, c, costs)
  ids = rng.integers(0, 3, size=(24, m)).astype(np.int32)
  batch = sim.simulate_batch(ids)
  single = [sim.simulate(row).step_time_s for row in ids]
  np.testing.assert_array_equal(batch, single)
  assert np.isinf(batch).any() and np.isfinite(batch).any()
  bound = lower_bound(g, c, costs)
  assert np.all(batch[np.isfinite(batch)] >= bound - 1e-12)


def test_a_fed_placeholder_enters_on_the_first_cpu_device():
  # x (a placeholder, 1000 B) -> c. TF puts the fed value on the client's
  # device (CPU 0) wherever x is placed: c on device 1 waits for the
  # transfer, 0.5 + 1000 / 100 = 10.5 s; c on device 0 waits for nothing.
  ops = [Op(name="x", type="Placeholder", output_bytes=(1000,)),
         Op(name="c", type="MatMul", output_bytes=(100,))]
  g = OpGraph(ops, [Edge(0, 1, 0, 1000)], graph_def=None, name="fed")
  c = cpu_cluster(2, latency_s=0.5, bandwidth=100.0)
  costs = make_costs([1.0, 1.0], 2, out=[1000, 100])
  for x_device in (0, 1):
    assert run(g, c, costs, [x_device, 1]).step_time_s == pytest.approx(
        1.0 + 10.5 + 1.0)
    assert run(g, c, costs, [x_device, 0]).step_time_s == pytest.approx(2.0)
  r = run(g, c, costs, [1, 1], schedule=True)
  assert [(s.op, s.device) for s in r.schedule] == [(0, 0), (1, 1)]
  (t,) = r.transfers
  assert (t.src_device, t.dst_device) == (0, 1)
  sim = Simulator(g, c, costs)
  np.testing.assert_allclose(sim.simulate_batch(np.array([[1, 1], [1, 0]])),
                             [12.5, 2.0])
  # The same graph with x an ordinary op: it runs where placed.
  plain = make_graph(2, [(0, 1, 1000)], out_bytes=[(1000,), (100,)])
  assert run(plain, c, costs, [1, 1]).step_time_s == pytest.approx(2.0)
