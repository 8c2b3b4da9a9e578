"""Tests of m-ETF on hand-made graphs whose schedules can be worked out."""

import tfplace  # noqa: F401  (before TensorFlow)

import numpy as np
import pytest

from tfplace.cost.cluster import Device, LinkSpec, make_cluster
from tfplace.cost.op_costs import OpCosts
from tfplace.graph.op_graph import Edge, Op, OpGraph
from tfplace.placers import baechi_common
from tfplace.placers import m_etf
from tfplace.placers.m_etf import METfPlacer
from tfplace.placers.problem import PlacementProblem


def _cluster(num_gpus=2, memory=1e9, cpu=False):
  devices = [Device(f"/device:GPU:{i}", "GPU", 1e12, 1e11, memory)
             for i in range(num_gpus)]
  if cpu:
    devices.append(Device("/device:CPU:0", "CPU", 1e11, 1e10, 1e10))
  return make_cluster("test", devices, default_link=LinkSpec(1e-3, 1e6))


def _chains(num_chains, length, nbytes=1000):
  ops, edges = [], []
  for c in range(num_chains):
    for k in range(length):
      ops.append(Op(f"c{c}_{k}", "X", output_bytes=(nbytes,)))
      if k:
        edges.append(Edge(len(ops) - 2, len(ops) - 1, 0, nbytes))
  return ops, edges


def _costs(graph, cluster, seconds):
  t = np.asarray(seconds, dtype=np.float64)
  compute = np.tile(t[:, None], (1, cluster.num_devices))
  for i, op in enumerate(graph.ops):
    for j, dev in enumerate(cluster.devices):
      if dev.type not in op.kernels:
        compute[i, j] = np.inf
  return OpCosts(compute, graph.param_bytes, graph.output_bytes)


def _place(graph, cluster, seconds, **config):
  placer = METfPlacer(baechi_common.BaechiOptions(**config))
  problem = PlacementProblem(graph, cluster, _costs(graph, cluster, seconds))
  placement = placer.place(problem)
  placement.validate(graph, cluster)
  return placement.to_array(graph, cluster)


def test_chain_stays_on_one_device():
  ops, edges = _chains(1, 6)
  graph = OpGraph(ops, edges, None)
  devices = _place(graph, _cluster(4), [1.0] * 6)
  assert set(devices.tolist()) == {0}


def test_two_heavy_chains_use_two_devices():
  ops, edges = _chains(2, 5)
  graph = OpGraph(ops, edges, None)
  devices = _place(graph, _cluster(2), [1.0] * 10)
  # Each chain whole on one device, the two chains on different devices.
  assert len(set(devices[:5])) == 1 and len(set(devices[5:])) == 1
  assert devices[0] != devices[5]


def test_fan_out_prefers_parallelism_when_transfer_is_cheap():
  # root -> {a, b}, each 1 s; transfer of 1000 B is 1e-3 + 1e-3 s.
  ops = [Op(n, "X", output_bytes=(1000,)) for n in ("root", "a", "b")]
  graph = OpGraph(ops, [Edge(0, 1, 0, 1000), Edge(0, 2, 0, 1000)], None)
  devices = _place(graph, _cluster(2), [1.0, 1.0, 1.0])
  assert devices[1] != devices[2]


def test_device_without_memory_for_group_is_skipped():
  # GPU:0 holds 1500 B; each op needs 1000 B; the chain must spill.
  ops, edges = _chains(1, 3)
  graph = OpGraph(ops, edges, None)
  cluster = make_cluster("test", [
      Device("/device:GPU:0", "GPU", 1e12, 1e11, 1500),
      Device("/device:GPU:1", "GPU", 1e12, 1e11, 1e9)])
  devices = _place(graph, cluster, [1.0] * 3)
  assert devices.tolist() == [0, 1, 1]


def test_colocation_group_never_split_and_charged_whole():
  # Ops 0 and 3 of two chains are one group: the second chain must follow.
  ops, edges = _chains(2, 3)
  groups = np.arange(6)
  groups[3] = 0
  graph = OpGraph(ops, edges, None, colocation_groups=groups)
  devices = _place(graph, _cluster(2), [1.0] * 6)
  assert devices[0] == devices[3]


def test_cpu_only_op_goes_to_cpu_and_gpus_preferred():
  ops, edges = _chains(1, 3)
  ops[1] = Op("c0_1", "Cpu", output_bytes=(1000,), kernels=frozenset({"CPU"}))
  graph = OpGraph(ops, edges, None)
  devices = _place(graph, _cluster(2, cpu=True), [1.0] * 3)
  assert devices.tolist() == [0, 2, 0]


def test_nothing_fits_still_places_every_op():
  ops, edges = _chains(1, 2)
  graph = OpGraph(ops, edges, None)
  devices = _place(graph, _cluster(2, memory=10), [1.0, 1.0])
  assert devices.shape == (2,)


def test_bad_memory_fraction_is_rejected():
  with pytest.raises(tfplace.errors.PlacementError):
    baechi_common.BaechiOptions(memory_fraction=0.0)


def test_single_op_without_edges():
  graph = OpGraph([Op("only", "X")], [], None)
  assert _place(graph, _cluster(2), [1.0]).tolist() == [0]


def test_start_times_follow_the_etf_rule():
  # a (2 s) and b (1 s) feed c; b's edge carries 1000 B (2e-3 s across).
  ops = [Op("a", "X"), Op("b", "X", output_bytes=(1000,)), Op("c", "X")]
  edges = [Edge(0, 2, -1, 0), Edge(1, 2, 0, 1000)]
  graph = OpGraph(ops, edges, None)
  cluster = _cluster(2)
  view = baechi_common.OpView(
      PlacementProblem(graph, cluster, _costs(graph, cluster, [2.0, 1.0, 1.0])),
      baechi_common.BaechiOptions())
  scheduler = m_etf.EtfScheduler(view)
  devices = scheduler.run()
  # a (higher b-level) goes first on GPU:0, b on GPU:1 at 0; c waits for a
  # on GPU:0 (2 s) rather than for a's control edge across (2 + 1e-3 s).
  assert devices.tolist() == [0, 1, 0]
  assert scheduler.finish.tolist() == pytest.approx([2.0, 1.0, 3.0])
