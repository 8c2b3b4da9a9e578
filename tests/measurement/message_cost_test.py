"""Tests for tfplace.measurement.message_cost."""

import numpy as np
import pytest
import tensorflow as tf

import tfplace  # noqa: F401
from tfplace.cost.calibrated import Calibration
from tfplace.cost.cluster import LinkSpec
from tfplace.errors import MeasureError
from tfplace.measurement import message_cost
from tfplace.measurement.config import MeasureConfig
from tfplace.measurement.local_cluster import (LOOPBACK_LINK, LocalCluster,
                                               make_worker_cluster,
                                               worker_device)

W0, W1 = worker_device(0), worker_device(1)


def _case(context, count=4, chain_ops=12):
  graph = tf.Graph()
  with graph.as_default():
    fetches = message_cost.build_case(context, count, W0, W1, chain_ops)
  return graph, fetches


def _remote_reads(graph):
  """Ops on the receiver that read a tensor made on the sender."""
  return [op for op in graph.get_operations() if op.device == W1
          and any(t.op.device == W0 for t in op.inputs)]


@pytest.mark.parametrize("context", [c for c in message_cost.CONTEXTS
                                     if c != "crossing"])
def test_every_context_sends_count_scalars_each_read_once(context):
  graph, fetches = _case(context)
  reads = _remote_reads(graph)
  assert len(reads) == 4 and {op.type for op in reads} == {"Mul"}
  assert all(t.shape.rank == 0 for op in reads for t in op.inputs)
  chains = {op.device for op in graph.get_operations()
            if op.type == "MatMul"}
  busy = {"idle": set(), "sender_busy": {W0}, "receiver_busy": {W1},
          "both_busy": {W0, W1}, "scattered": {W0},
          "two_way": set()}[context]
  assert chains == busy
  assert len(fetches) == 1 + len(busy) + (context == "two_way")


def test_two_way_sends_as_many_scalars_back():
  graph, _ = _case("two_way")
  back = [op for op in graph.get_operations() if op.device == W0
          and any(t.op.device == W1 for t in op.inputs)]
  assert len(back) == 4 and {op.type for op in back} == {"Mul"}


def test_crossing_chains_cross_count_times_both_ways():
  graph, fetches = _case("crossing", count=16)
  adds = [op for op in graph.get_operations()
          if op.name.startswith("hop_") and op.type == "AddV2"]
  assert len(adds) == 16
  # Each add reads the op before it in its chain, on the other worker.
  assert all(op.inputs[0].op.device != op.device for op in adds)
  assert {op.device for op in adds} == {W0, W1}
  crossing = [(t.op.device, op.device) for op in graph.get_operations()
              for t in op.inputs if t.op.device != op.device]
  # 16 hops, and the sums of the chains that started on the receiver.
  assert len(crossing) == 16 + message_cost.CROSSING_CHAINS // 2
  assert len(fetches) == 1 and fetches[0].op.device == W0
  with pytest.raises(MeasureError, match="multiple of 8 messages, got 12"):
    _case("crossing", count=12)


def test_messages_of_given_bytes_are_float_vectors():
  graph = tf.Graph()
  with graph.as_default():
    message_cost.build_case("idle", 3, W0, W1, 12, message_bytes=4096)
  sizes = [t.shape.num_elements() * t.dtype.size
           for op in _remote_reads(graph) for t in op.inputs
           if t.op.device == W0]
  assert sizes == [4096] * 3


def test_scattered_scalars_sum_every_few_results_of_the_chain():
  graph, _ = _case("scattered", count=4, chain_ops=12)
  matmuls = [op for op in graph.get_operations() if op.type == "MatMul"]
  sums = [t.op for op in _remote_reads(graph) for t in op.inputs
          if t.op.device == W0]
  # One scalar every 12 // 4 = 3 matmuls: the 3rd, 6th, 9th and 12th.
  assert [s.inputs[0].op for s in sums] == [matmuls[i] for i in
                                              (2, 5, 8, 11)]


def test_a_busy_sender_chain_starts_from_every_scalar():
  graph, _ = _case("sender_busy")
  add_n = [op for op in graph.get_operations() if op.type == "AddN"
           and op.device == W0]
  assert len(add_n) == 1 and len(add_n[0].inputs) == 4


@pytest.mark.parametrize("sizes, message", [
    (dict(few=0), "few < many <= chain_ops"),
    (dict(few=8, many=8), "few < many <= chain_ops"),
    (dict(many=40, chain_ops=20), "few < many <= chain_ops"),
    (dict(message_bytes=6), "multiple of 4")])
def test_bad_sizes_are_refused(sizes, message):
  with pytest.raises(MeasureError, match=message):
    message_cost.MessageCostConfig(**sizes)


def test_unknown_contexts_are_refused():
  with pytest.raises(MeasureError, match="contexts must be among"):
    message_cost.measure_message_costs(W0, W1, ["busy"])
  with pytest.raises(MeasureError, match="contexts must be among"):
    message_cost.build_case("busy", 4, W0, W1, 12)


def test_a_simulated_stream_costs_one_ends_share_per_message():
  # Rendezvous transfers on a loopback link, ops free: each message holds
  # the sender, then the receiver, for its host cost and half the latency;
  # the two ends work in a pipeline, so a message adds one end's share.
  cluster = make_worker_cluster(2)
  calibration = Calibration(
      launch_overhead_s={"CPU": 0.0}, transfer_overhead_s={"CPU": 40e-6},
      links={LOOPBACK_LINK.kind: LinkSpec(60e-6, 1e12, LOOPBACK_LINK.kind)},
      rendezvous_transfers=True)
  sizes = message_cost.MessageCostConfig(few=4, many=12, chain_ops=12)
  costs = message_cost.predicted_message_costs(cluster, calibration, W0, W1,
                                               ["idle"], sizes)
  assert costs["idle"] == pytest.approx(40e-6 + 30e-6, rel=0.01)
  with pytest.raises(MeasureError, match="not a device"):
    message_cost.predicted_message_costs(cluster, calibration, W0,
                                         "/job:worker/task:5", ["idle"],
                                         sizes)


def test_measures_a_stream_on_two_servers():
  sizes = message_cost.MessageCostConfig(few=2, many=32, chain_ops=32)
  with LocalCluster(num_workers=2) as lc:
    config = MeasureConfig(target=lc.target, steps=1, warmup=1)
    costs = message_cost.measure_message_costs(W0, W1, ["idle"], sizes,
                                               config)
  # 30 more scalars between the workers make the step longer.
  assert list(costs) == ["idle"]
  assert np.isfinite(costs["idle"]) and costs["idle"] > 0.0
