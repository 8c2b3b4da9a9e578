"""Transfer host overheads, rendezvous transfers and the fixed step
overhead, worked by hand."""

import dataclasses
import json

import numpy as np
import pytest

import tfplace  # noqa: F401
from tfplace.cost.analytical import AnalyticalCostModel
from tfplace.cost.cluster import Cluster, Device
from tfplace.simulator.lower_bound import lower_bound
from tfplace.cost.op_costs import OpCosts
from tfplace.cost.presets import cpu_cluster
from tfplace.simulator.simulator import Simulator
from tfplace.errors import ClusterError
from tfplace.graph.op_graph import Edge, Op, OpGraph
from tfplace.models.registry import build_model


def make_graph(num_ops, edges, num_outputs=1):
  """edges: (src, dst, bytes, src_output)."""
  ops = [Op(name=f"op{i}", type="MatMul",
            output_bytes=(1000,) * num_outputs) for i in range(num_ops)]
  return OpGraph(ops, [Edge(s, d, o, b) for s, d, b, o in edges],
                 graph_def=None, name="tiny")


def make_costs(seconds, num_devices):
  s = np.repeat(np.asarray(seconds, dtype=np.float64)[:, None], num_devices,
                axis=1)
  m = s.shape[0]
  return OpCosts(s, np.zeros(m, np.int64), np.full(m, 1000, np.int64))


def with_overheads(cluster, transfer=(0.0, 0.0), step=0.0):
  devices = tuple(dataclasses.replace(d, transfer_overhead_s=h)
                  for d, h in zip(cluster.devices, transfer))
  return dataclasses.replace(cluster, devices=devices, step_overhead_s=step)


def run(graph, cluster, costs, ids):
  return Simulator(graph, cluster, costs).simulate(np.array(ids), True)


# A fork: op0 -> op1 (local), op0 -> op2 (remote); 1000 B over a link of
# 0.5 s latency and 100 B/s takes 10.5 s. Without overheads the step is
# 1 + 10.5 + 1 = 12.5 s.
FORK = [(0, 1, 1000, 0), (0, 2, 1000, 0)]


def test_one_remote_tensor_costs_overhead_on_both_ends():
  g = make_graph(3, FORK)
  c = with_overheads(cpu_cluster(2, latency_s=0.5, bandwidth=100.0),
                     transfer=(0.25, 0.25))
  r = run(g, c, make_costs([1.0, 1.0, 1.0], 2), [0, 0, 1])
  # op0 runs 1.25 s; the transfer 1.25 -> 11.75; op2 runs 1.25 s -> 13.0.
  assert r.step_time_s == pytest.approx(13.0)
  (t,) = r.transfers
  assert (t.start_s, t.end_s) == pytest.approx((1.25, 11.75))
  # op0 1.25 + op1 1 on device 0; op2 1.25 on device 1: 2 x 0.25 extra.
  np.testing.assert_allclose(r.device_busy_s, [2.25, 1.25])
  assert r.device_busy_s.sum() == pytest.approx(3.0 + 2 * 0.25)


def test_sender_and_receiver_pay_their_own_overhead():
  g = make_graph(3, FORK)
  c = with_overheads(cpu_cluster(2, latency_s=0.5, bandwidth=100.0),
                     transfer=(0.25, 2.0))
  r = run(g, c, make_costs([1.0, 1.0, 1.0], 2), [0, 0, 1])
  assert r.step_time_s == pytest.approx(1.25 + 10.5 + 3.0)
  np.testing.assert_allclose(r.device_busy_s, [2.25, 3.0])


def test_host_cost_per_byte_is_paid_on_both_ends():
  g = make_graph(3, FORK)
  devices = tuple(dataclasses.replace(d, transfer_overhead_s=0.25,
                                      transfer_byte_s=b)
                  for d, b in zip(cpu_cluster(2, latency_s=0.5,
                                              bandwidth=100.0).devices,
                                  (1e-3, 2e-3)))
  c = dataclasses.replace(cpu_cluster(2, latency_s=0.5, bandwidth=100.0),
                          devices=devices)
  r = run(g, c, make_costs([1.0, 1.0, 1.0], 2), [0, 0, 1])
  # 1000 B: the sender 0.25 + 1 s, the receiver 0.25 + 2 s.
  (t,) = r.transfers
  assert (t.start_s, t.end_s) == pytest.approx((2.25, 12.75))
  assert r.step_time_s == pytest.approx(12.75 + 3.25)
  np.testing.assert_allclose(r.device_busy_s, [3.25, 3.25])
  # Nothing crosses: nothing is charged.
  assert run(g, c, make_costs([1.0, 1.0, 1.0], 2),
             [1, 1, 1]).step_time_s == pytest.approx(3.0)


def test_no_transfer_no_overhead():
  g = make_graph(3, FORK)
  c = with_overheads(cpu_cluster(2), transfer=(0.25, 0.25))
  r = run(g, c, make_costs([1.0, 1.0, 1.0], 2), [1, 1, 1])
  assert r.step_time_s == pytest.approx(3.0)


def test_tensor_read_twice_on_one_remote_device_is_paid_once():
  # op0 (device 0) -> op1, op2 (device 1): one transfer; the receive cost
  # goes to op1 (first in topological order). Zero-cost link.
  g = make_graph(3, [(0, 1, 1000, 0), (0, 2, 1000, 0)])
  c = with_overheads(cpu_cluster(2, latency_s=0.0, bandwidth=1e30),
                     transfer=(0.5, 0.25))
  r = run(g, c, make_costs([1.0, 1.0, 1.0], 2), [0, 1, 1])
  np.testing.assert_allclose(r.device_busy_s, [1.5, 2.25])
  assert r.step_time_s == pytest.approx(1.5 + 1.25 + 1.0)
  op1 = [s for s in r.schedule if s.op == 1][0]
  assert op1.end_s - op1.start_s == pytest.approx(1.25)


def test_two_output_tensors_to_one_device_are_two_transfers():
  # op0's outputs 0 and 1 are both read on device 1: two sends, two receives.
  g = make_graph(3, [(0, 1, 1000, 0), (0, 2, 1000, 1)], num_outputs=2)
  c = with_overheads(cpu_cluster(2, latency_s=0.0, bandwidth=1e30),
                     transfer=(0.5, 0.25))
  r = run(g, c, make_costs([1.0, 1.0, 1.0], 2), [0, 1, 1])
  np.testing.assert_allclose(r.device_busy_s, [2.0, 2.5])
  assert r.step_time_s == pytest.approx(2.0 + 2.5)


def test_step_overhead_adds_exactly_its_value():
  g = make_graph(3, FORK)
  base = cpu_cluster(2, latency_s=0.5, bandwidth=100.0)
  costs = make_costs([1.0, 1.0, 1.0], 2)
  c = with_overheads(base, step=0.125)
  for ids, plain in (([0, 0, 1], 12.5), ([0, 0, 0], 3.0)):
    r = run(g, c, costs, ids)
    assert r.step_time_s == pytest.approx(plain + 0.125)
    # The schedule itself is not shifted.
    assert max(s.end_s for s in r.schedule) == pytest.approx(plain)
  assert lower_bound(g, c, costs) == pytest.approx(2.0 + 0.125)
  assert lower_bound(g, base, costs) == pytest.approx(2.0)


def test_batch_matches_single_with_overheads():
  g = make_graph(4, [(0, 1, 1000, 0), (0, 2, 1000, 0), (2, 3, 1000, 0),
                     (1, 3, 1000, 0)])
  c = with_overheads(cpu_cluster(2, latency_s=0.01, bandwidth=1e5),
                     transfer=(0.1, 0.2), step=0.05)
  costs = make_costs([1.0, 2.0, 3.0, 0.5], 2)
  sim = Simulator(g, c, costs)
  ids = np.array([[0, 0, 0, 0], [0, 1, 0, 1], [1, 0, 1, 0], [0, 1, 1, 0]],
                 dtype=np.int32)
  batch = sim.simulate_batch(ids)
  single = [sim.simulate(row).step_time_s for row in ids]
  np.testing.assert_allclose(batch, single)
  assert batch[0] == pytest.approx(6.5 + 0.05)
  bound = lower_bound(g, c, costs)
  assert np.all(batch >= bound - 1e-12)


@pytest.mark.parametrize("value", [-1e-6, float("nan"), float("inf"), "x"])
def test_bad_overheads_raise(value):
  name = "/job:localhost/replica:0/task:0/device:CPU:0"
  with pytest.raises(ClusterError):
    Device(name, "CPU", 1e9, 1e9, 1e9, transfer_overhead_s=value)
  dev = Device(name, "CPU", 1e9, 1e9, 1e9)
  with pytest.raises(ClusterError):
    Cluster("c", (dev,), step_overhead_s=value)
  with pytest.raises(ClusterError):
    Cluster.from_dict({"devices": [dataclasses.asdict(dev)],
                       "step_overhead_s": value})


def test_cluster_json_round_trip_and_old_files():
  c = with_overheads(cpu_cluster(2), transfer=(1e-4, 2e-4), step=3e-3)
  back = Cluster.from_dict(json.loads(c.to_json()))
  assert back.step_overhead_s == 3e-3
  assert [d.transfer_overhead_s for d in back.devices] == [1e-4, 2e-4]
  old = json.loads(cpu_cluster(2).to_json())
  del old["step_overhead_s"]
  for d in old["devices"]:
    del d["transfer_overhead_s"]
  back = Cluster.from_dict(old)
  assert back.step_overhead_s == 0.0
  assert [d.transfer_overhead_s for d in back.devices] == [0.0, 0.0]


def test_cross_device_control_edges_cost_one_message_per_device():
  # op0 (device 0) -ctrl-> op1, op2 (device 1) and -ctrl-> op3 (device 0):
  # one dummy message 0 -> 1 (TF's Send/Recv for control edges), no link
  # time even on a 0.5 s link; its receive cost goes to op1.
  g = make_graph(4, [])
  g = OpGraph(g.ops, [Edge(0, 1, -1, 0), Edge(0, 2, -1, 0),
                      Edge(0, 3, -1, 0)], graph_def=None, name="ctrl")
  c = with_overheads(cpu_cluster(2, latency_s=0.5, bandwidth=100.0),
                     transfer=(0.25, 0.5))
  r = run(g, c, make_costs([1.0, 1.0, 1.0, 1.0], 2), [0, 1, 1, 0])
  np.testing.assert_allclose(r.device_busy_s, [2.25, 2.5])
  assert r.step_time_s == pytest.approx(1.25 + 1.5 + 1.0)
  assert r.bytes_moved == 0 and not r.transfers
  # Without overheads a control edge only orders.
  r = run(g, cpu_cluster(2, latency_s=0.5, bandwidth=100.0),
          make_costs([1.0, 1.0, 1.0, 1.0], 2), [0, 1, 1, 0])
  assert r.step_time_s == pytest.approx(3.0)


def test_overlapped_latency_does_not_hold_the_link():
  # Two 1000 B tensors from op0 to device 1 over 0.5 s + 100 B/s: FIFO sends
  # them 1.0-11.5 and 11.5-22.0; overlapped, the link is held 10 s each
  # (1-11, 11-21) and each arrives 0.5 s later (11.5, 21.5).
  g = make_graph(3, [(0, 1, 1000, 0), (0, 2, 1000, 1)], num_outputs=2)
  base = cpu_cluster(2, latency_s=0.5, bandwidth=100.0)
  costs = make_costs([1.0, 1.0, 1.0], 2)
  r = run(g, base, costs, [0, 1, 1])
  assert r.step_time_s == pytest.approx(23.0)
  c = dataclasses.replace(base, overlap_latency=True)
  r = run(g, c, costs, [0, 1, 1])
  times = [x for t in r.transfers for x in (t.start_s, t.end_s)]
  assert times == pytest.approx([1.0, 11.5, 11.0, 21.5])
  assert r.step_time_s == pytest.approx(22.5)
  assert Cluster.from_dict(json.loads(c.to_json())).overlap_latency
  with pytest.raises(ClusterError):
    dataclasses.replace(base, overlap_latency="yes")


def test_with_cluster_matches_a_fresh_simulator():
  g = make_graph(3, FORK)
  costs = make_costs([1.0, 1.0, 1.0], 2)
  sim = Simulator(g, cpu_cluster(2), costs)
  other = with_overheads(cpu_cluster(2, latency_s=0.5, bandwidth=100.0),
                         transfer=(0.25, 0.25), step=0.5)
  ids = np.array([0, 0, 1])
  assert sim.with_cluster(other).simulate(ids).step_time_s == pytest.approx(
      Simulator(g, other, costs).simulate(ids).step_time_s) == 13.5
  assert sim.simulate(ids).step_time_s < 13.5


def test_run_overhead_is_paid_per_device_the_step_uses():
  g = make_graph(3, FORK)
  base = with_overheads(cpu_cluster(2, latency_s=0.5, bandwidth=100.0),
                        step=0.125)
  devices = (dataclasses.replace(base.devices[0], run_overhead_s=0.25),
             dataclasses.replace(base.devices[1], run_overhead_s=1.0))
  c = dataclasses.replace(base, devices=devices)
  costs = make_costs([1.0, 1.0, 1.0], 2)
  sim = Simulator(g, c, costs)
  # One device: its run overhead; both: both (plus the step overhead).
  cases = (([0, 0, 0], 3.0 + 0.125 + 0.25), ([1, 1, 1], 3.0 + 0.125 + 1.0),
           ([0, 0, 1], 12.5 + 0.125 + 1.25))
  for ids, expected in cases:
    assert sim.simulate(np.array(ids)).step_time_s == pytest.approx(expected)
  batch = sim.simulate_batch(np.array([ids for ids, _ in cases]))
  np.testing.assert_allclose(batch, [e for _, e in cases])


def test_measured_device_fields_round_trip_and_stay_out_when_zero():
  c = cpu_cluster(2)
  measured = (dataclasses.replace(c.devices[0], matmul_flops=1e11,
                                  conv_flops=9e10, copy_bandwidth=2e10,
                                  run_overhead_s=1e-4, recv_issue_s=2e-5),
                ) + c.devices[1:]
  m = dataclasses.replace(c, devices=measured)
  data = json.loads(m.to_json())
  assert data["devices"][0]["matmul_flops"] == 1e11
  assert data["devices"][0]["recv_issue_s"] == 2e-5
  assert "matmul_flops" not in data["devices"][1]
  assert "run_overhead_s" not in data["devices"][1]
  assert "recv_issue_s" not in data["devices"][1]
  assert Cluster.from_dict(data) == m
  with pytest.raises(ClusterError):
    dataclasses.replace(c.devices[0], conv_flops=-1.0)


# ---- rendezvous transfers (`Cluster.rendezvous_transfers`): message work
# is done by a device with no op running or ready (`kernel._serve_messages`).

def starts(result):
  return [op.start_s for op in sorted(result.schedule, key=lambda s: s.op)]


def link(rendezvous, latency_s=0.0, bandwidth=100.0, kind="host", **kwargs):
  c = cpu_cluster(2, latency_s=latency_s, bandwidth=bandwidth)
  return dataclasses.replace(
      c, rendezvous_transfers=rendezvous,
      default_link=dataclasses.replace(c.default_link, kind=kind), **kwargs)


def test_a_message_leaves_when_its_sender_has_nothing_to_run():
  # op0 -> op1 -> op3 (device 0), op0 -> op2 (device 1); 1000 B over
  # 0.5 s + 100 B/s. Device 0 runs op0, op1, op3 (0-3), then sends: it
  # holds device 0 for the bytes, 3-13, and arrives at 13.5; op2 runs
  # 13.5-14.5.
  g = make_graph(4, [(0, 1, 1000, 0), (0, 2, 1000, 0), (1, 3, 10, 0)])
  costs = make_costs([1.0, 1.0, 1.0, 1.0], 2)
  r = run(g, link(True, latency_s=0.5), costs, [0, 0, 1, 0])
  (t,) = r.transfers
  assert (t.start_s, t.end_s) == pytest.approx((3.0, 13.5))
  np.testing.assert_allclose(starts(r), [0.0, 1.0, 13.5, 2.0])
  assert r.step_time_s == pytest.approx(14.5)
  np.testing.assert_allclose(r.device_busy_s, [13.0, 1.0])
  # Without: the transfer starts when op0 ends, 1-11.5 s.
  r = run(g, link(False, latency_s=0.5), costs, [0, 0, 1, 0])
  assert r.step_time_s == pytest.approx(12.5)


def test_an_arrival_waits_until_its_receiver_has_nothing_to_run():
  # op0 (1 s, device 0) sends 100 B (1 s) to op2 (1 s, device 1), where op1
  # runs 0-5. The message is sent 1-2 and arrives at 2; device 1 takes it
  # when op1 ends: op2 runs 5-6. With 0.5 s per message on each end, the
  # send holds device 0 1-2.5 and the parse device 1 5-5.5: op2 5.5-6.5.
  g = make_graph(3, [(0, 2, 100, 0)])
  costs = make_costs([1.0, 5.0, 1.0], 2)
  r = run(g, link(True), costs, [0, 1, 1])
  (t,) = r.transfers
  assert (t.start_s, t.end_s) == pytest.approx((1.0, 2.0))
  np.testing.assert_allclose(starts(r), [0.0, 0.0, 5.0])
  r = run(g, with_overheads(link(True), (0.5, 0.5)), costs, [0, 1, 1])
  (t,) = r.transfers
  assert (t.start_s, t.end_s) == pytest.approx((1.5, 2.5))
  np.testing.assert_allclose(starts(r), [0.0, 0.0, 5.5])
  assert r.step_time_s == pytest.approx(6.5)
  np.testing.assert_allclose(r.device_busy_s, [2.5, 6.5])


def test_messages_go_in_order_and_each_arrival_waits_for_an_idle_receiver():
  # Two 100 B tensors from op0 (device 0) to op1 and op2 (device 1): sent
  # 1-2 and 2-3. op1 runs 2-3 on the first; the second arrives at 3, as
  # op1 ends: op2 runs 3-4.
  g = make_graph(3, [(0, 1, 100, 0), (0, 2, 100, 1)], num_outputs=2)
  r = run(g, link(True), make_costs([1.0, 1.0, 1.0], 2), [0, 1, 1])
  times = sorted(x for t in r.transfers for x in (t.start_s, t.end_s))
  assert times == pytest.approx([1.0, 2.0, 2.0, 3.0])
  np.testing.assert_allclose(starts(r), [0.0, 2.0, 3.0])
  assert r.step_time_s == pytest.approx(4.0)


def test_an_idle_receiver_parses_a_message_when_it_arrives():
  # Three devices, per-message cost 0.5 s on each: op0 (1 s, device 0) and
  # op1 (3 s, device 1) each send 100 B (1 s) to op2 (1 s, device 2).
  # Rendezvous: each sender, idle after its op, holds its device for the
  # send (1-2.5, 3-4.5); device 2, idle, parses each message when it
  # arrives (2.5-3, 4.5-5): op2 runs 5-6. Link model: the senders pay in
  # their ops (op0 0-1.5, op1 0-3.5), op2 pays both parses as it runs,
  # 4.5-6.5.
  g = make_graph(3, [(0, 2, 100, 0), (1, 2, 100, 0)])
  costs = make_costs([1.0, 3.0, 1.0], 3)
  for rendezvous, step, start, busy in ((True, 6.0, 5.0, [2.5, 4.5, 2.0]),
                                        (False, 6.5, 4.5, [1.5, 3.5, 2.0])):
    cluster = dataclasses.replace(
        cpu_cluster(3, latency_s=0.0, bandwidth=100.0),
        rendezvous_transfers=rendezvous)
    r = run(g, with_overheads(cluster, (0.5, 0.5, 0.5)), costs, [0, 1, 2])
    assert r.step_time_s == pytest.approx(step)
    assert starts(r)[2] == pytest.approx(start)
    assert sorted(x for t in r.transfers for x in (t.start_s, t.end_s)) == (
        pytest.approx([1.5, 2.5, 3.5, 4.5]))
    np.testing.assert_allclose(r.device_busy_s, busy)


def test_a_busy_receiver_parses_when_it_has_nothing_else_to_run():
  # op4 (2.5 s) then op3 (5 s) on device 1; op0 then op1 (1 s each, op1
  # reads op0) on device 0; op0 sends 100 B (1 s, 2 s latency) to op2 (1 s,
  # device 1);
  # 0.5 s per message on each end. Device 0 sends when op1 ends: 2-3.5
  # (its 0.5 s, then the bytes), arriving at 5.5 while op3 (2.5-7.5)
  # runs; device 1 parses it after op3, 7.5-8: op2 runs 8-9.
  g = make_graph(5, [(0, 2, 100, 0), (0, 1, 100, 0), (4, 3, 100, 0)])
  costs = make_costs([1.0, 1.0, 1.0, 5.0, 2.5], 2)
  r = run(g, with_overheads(link(True, latency_s=2.0), (0.5, 0.5)), costs,
          [0, 0, 1, 1, 1])
  (t,) = r.transfers
  assert (t.start_s, t.end_s) == pytest.approx((2.5, 5.5))
  np.testing.assert_allclose(starts(r), [0.0, 1.0, 8.0, 2.5, 0.0])
  assert r.step_time_s == pytest.approx(9.0)
  np.testing.assert_allclose(r.device_busy_s, [3.5, 9.0])


def test_a_loopback_links_latency_is_work_on_both_ends():
  # The graph of the test above it but one: two 100 B tensors (1 s each)
  # from op0 (device 0) to op1 and op2 (device 1), latency 0.4 s. On a
  # loopback link the latency is host work, half on each end: each send
  # holds device 0 for 0.2 + 1 s (1-2.2, 2.2-3.4) and arrives at once;
  # each parse holds device 1 0.2 s: op1 runs 2.4-3.4, the second parse
  # 3.4-3.6, op2 3.6-4.6. On another kind of link it is time in flight
  # (overlapping, as on calibrated clusters): sends 1-2 and 2-3 arrive at
  # 2.4 and 3.4; op1 2.4-3.4, op2 3.4-4.4.
  g = make_graph(3, [(0, 1, 100, 0), (0, 2, 100, 1)], num_outputs=2)
  costs = make_costs([1.0, 1.0, 1.0], 2)
  for kind, step, busy in (("loopback", 4.6, [3.4, 2.4]),
                           ("host", 4.4, [3.0, 2.0])):
    cluster = link(True, latency_s=0.4, kind=kind, overlap_latency=True)
    r = run(g, cluster, costs, [0, 1, 1])
    assert r.step_time_s == pytest.approx(step), kind
    np.testing.assert_allclose(r.device_busy_s, busy)
  loopback = link(True, latency_s=0.4, kind="loopback")
  np.testing.assert_allclose(loopback.host_latency, [[0, 0.4], [0.4, 0]])
  assert not link(False, latency_s=0.4, kind="loopback").host_latency.any()


def test_a_cross_device_control_edge_is_a_message_on_rendezvous_clusters():
  # The graph of `test_cross_device_control_edges_cost_one_message_per_
  # device`: op0 (device 0) -ctrl-> op1, op2 (device 1), -ctrl-> op3
  # (device 0); 0.25 s per message on device 0, 0.5 s on device 1. op0
  # runs 0-1, op3 1-2; device 0 then sends the dummy message (0 B) 2-2.25,
  # it travels 0.5 s (2.25-2.75) and device 1, idle, parses it 2.75-3.25:
  # op1 runs 3.25-4.25, op2 4.25-5.25.
  g = make_graph(4, [])
  g = OpGraph(g.ops, [Edge(0, 1, -1, 0), Edge(0, 2, -1, 0),
                      Edge(0, 3, -1, 0)], graph_def=None, name="ctrl")
  r = run(g, with_overheads(link(True, latency_s=0.5), (0.25, 0.5)),
          make_costs([1.0, 1.0, 1.0, 1.0], 2), [0, 1, 1, 0])
  (t,) = r.transfers
  assert (t.producer, t.src_device, t.dst_device, t.nbytes) == (0, 0, 1, 0)
  assert (t.start_s, t.end_s) == pytest.approx((2.25, 2.75))
  np.testing.assert_allclose(starts(r), [0.0, 3.25, 4.25, 1.0])
  assert r.step_time_s == pytest.approx(5.25)
  np.testing.assert_allclose(r.device_busy_s, [2.25, 2.5])
  assert r.bytes_moved == 0
  # Without overheads it still waits for op3 and the message: 1 + 1 +
  # 0.5 + 2.
  r = run(g, link(True, latency_s=0.5), make_costs([1.0] * 4, 2),
          [0, 1, 1, 0])
  assert r.step_time_s == pytest.approx(4.5)
  # On one device nothing is sent.
  r = run(g, link(True, latency_s=0.5), make_costs([1.0] * 4, 2),
          [0, 0, 0, 0])
  assert not r.transfers and r.step_time_s == pytest.approx(4.0)


def test_no_transfer_no_change_and_the_bound_holds():
  g = build_model("small_cnn")
  base = cpu_cluster(2)
  sim = Simulator(g, base, AnalyticalCostModel().op_costs(g, base))
  rdv = sim.with_cluster(dataclasses.replace(base, rendezvous_transfers=True))
  rng = np.random.default_rng(0)
  ids = rng.integers(0, 2, size=(16, g.num_ops)).astype(np.int32)
  ids[0] = 0
  plain, held = sim.simulate_batch(ids), rdv.simulate_batch(ids)
  assert held[0] == plain[0]
  assert np.all(held[1:] != plain[1:])
  single = [rdv.simulate(row).step_time_s for row in ids]
  np.testing.assert_allclose(held, single)
  assert np.all(held >= lower_bound(g, rdv.cluster, rdv.costs) - 1e-12)


def test_cluster_json_round_trip():
  c = link(True)
  assert Cluster.from_dict(json.loads(c.to_json())).rendezvous_transfers
  old = json.loads(link(False).to_json())
  del old["rendezvous_transfers"]
  assert not Cluster.from_dict(old).rendezvous_transfers
  with pytest.raises(ClusterError, match="rendezvous_transfers"):
    link("yes")


def test_only_an_arrival_that_wakes_its_receiver_pays_the_latency():
  # op0 (1 s, device 0) sends two tensors to op1 and op2 (1 s each, device
  # 1); loopback latency 0.4 s (0.2 s on each end), 0.5 s per message on
  # each end, bytes free. Each send holds device 0 for 0.5 + 0.2 s (1-1.7,
  # 1.7-2.4). With op3 (3 s) on device 1, both arrive while it computes:
  # neither wakes it, so each parse is 0.5 s: 3-3.5, op1 3.5-4.5, 4.5-5,
  # op2 5-6. With op3 of 0.5 s, the first finds device 1 asleep: its parse
  # holds 0.5 + 0.2 s (1.7-2.4), op1 2.4-3.4; the second arrived at 2.4
  # while that parse held device 1: 3.4-3.9, op2 3.9-4.9.
  g = make_graph(4, [(0, 1, 10, 0), (0, 2, 10, 1)], num_outputs=2)
  cluster = with_overheads(
      link(True, latency_s=0.4, bandwidth=1e12, kind="loopback"),
      (0.5, 0.5))
  for busy_s, op_starts, step in ((3.0, [0.0, 3.5, 5.0, 0.0], 6.0),
                                  (0.5, [0.0, 2.4, 3.9, 0.0], 4.9)):
    costs = make_costs([1.0, 1.0, 1.0, busy_s], 2)
    r = run(g, cluster, costs, [0, 1, 1, 1])
    np.testing.assert_allclose(starts(r), op_starts)
    assert r.step_time_s == pytest.approx(step)


def with_recv_issue(cluster, seconds):
  return dataclasses.replace(cluster, devices=tuple(
      dataclasses.replace(d, recv_issue_s=seconds) for d in cluster.devices))


def test_recvs_are_issued_first_and_a_stored_tensor_skips_the_latency():
  # op0 (1 s, device 0) -> op1 (1 s, device 1); loopback latency 0.4 s
  # (0.2 s of host work on each end), no per-message cost, bytes free.
  # Device 1 issues its Recv 0-0.3 s: the request reaches device 0 at 0.3,
  # while op0 runs (0-1), so op0's tensor is stored before it is asked
  # for, and the sender answers without the latency's share: it arrives
  # at 1. The issue is part of the receive cost, so the parse's own cost
  # (0 - 0.3, not below 0) is free, but the arrival wakes the idle device
  # 1, which costs its 0.2 s share: the parse 1-1.2, op1 1.2-2.2. Without
  # an issue cost: the send 1-1.2, the parse 1.2-1.4, op1 1.4-2.4.
  g = make_graph(2, [(0, 1, 10, 0)])
  costs = make_costs([1.0, 1.0], 2)
  plain = link(True, latency_s=0.4, bandwidth=1e12, kind="loopback")
  r = run(g, with_recv_issue(plain, 0.3), costs, [0, 1])
  np.testing.assert_allclose(starts(r), [0.0, 1.2])
  np.testing.assert_allclose(r.device_busy_s, [1.0, 1.5])
  assert run(g, plain, costs, [0, 1]).step_time_s == pytest.approx(2.4)


def test_a_send_answers_a_request_that_waited_with_the_latencys_share():
  # op0 (1 s, device 1) -> op1 (0.5 s, device 0) -> op2 (1 s, device 1),
  # issue 0.3 s on each device. Device 1 issues 0-0.3 and runs op0
  # 0.3-1.3 without a pause: op0's tensor is stored before device 0's
  # request (0.3) is taken: sent free, it arrives at 1.3 and wakes device
  # 0 (idle since 0.3), whose parse holds its 0.2 s share: op1 1.5-2.0.
  # Device 1 was idle after device 0's request came (0.3): op1's send
  # answers it, holding device 0 for 0.2 s (2.0-2.2); it wakes device 1
  # (0.2 s): op2 2.4-3.4. Without issue costs: 3.3 s (each message 0.2 +
  # 0.2).
  g = make_graph(3, [(0, 1, 10, 0), (1, 2, 10, 0)])
  costs = make_costs([1.0, 0.5, 1.0], 2)
  plain = link(True, latency_s=0.4, bandwidth=1e12, kind="loopback")
  r = run(g, with_recv_issue(plain, 0.3), costs, [1, 0, 1])
  np.testing.assert_allclose(starts(r), [0.3, 1.5, 2.4])
  assert r.step_time_s == pytest.approx(3.4)
  np.testing.assert_allclose(r.device_busy_s, [1.2, 2.5])
  assert run(g, plain, costs, [1, 0, 1]).step_time_s == pytest.approx(3.3)
  # Only rendezvous clusters have an issue phase.
  other = with_recv_issue(link(False, latency_s=0.4, bandwidth=1e12,
                               kind="loopback"), 0.3)
  assert run(g, other, costs, [1, 0, 1]).step_time_s == pytest.approx(
      run(g, link(False, latency_s=0.4, bandwidth=1e12, kind="loopback"),
          costs, [1, 0, 1]).step_time_s)
