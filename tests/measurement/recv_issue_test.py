"""Tests for tfplace.measurement.recv_issue."""

import dataclasses

import pytest

import tfplace  # noqa: F401
from tfplace.cost.calibrated import Calibration, apply_calibration
from tfplace.cost.presets import cpu_cluster
from tfplace.errors import MeasureError
from tfplace.measurement import recv_issue
from tfplace.measurement.calibration_fit import calibration_from_benchmark
from tfplace.measurement.cluster_benchmark import (ClusterBenchmark,
                                                   DeviceBenchmark)
from tfplace.measurement.config import MeasureConfig
from tfplace.measurement.local_cluster import (LocalCluster,
                                               make_worker_cluster,
                                               worker_device)

W = [worker_device(i) for i in range(3)]


def test_the_ring_sends_and_receives_on_every_device():
  graph, placement = recv_issue.ring_graph(W, messages=5)
  device = [placement.devices[op.name] for op in graph.ops]
  ptr, src = graph.predecessors_csr
  for i, d in enumerate(W):
    # Each device reads 5 scalars made on the one before it.
    reads = {j for j in range(graph.num_ops) if device[j] == d
             and any(device[p] != d for p in src[ptr[j]:ptr[j + 1]])}
    makers = {device[p] for j in reads for p in src[ptr[j]:ptr[j + 1]]
              if device[p] != d}
    assert len(reads) == 5 and makers == {W[i - 1]}, d
  assert set(device) == set(W)
  with pytest.raises(MeasureError, match="two devices"):
    recv_issue.ring_graph(W[:1])


def _bench(issue):
  device = DeviceBenchmark(W[0], 1e11, 1e11, 1e10, 1e-6, 2e-6, 1e-4,
                           recv_issue_s=issue)
  return ClusterBenchmark(devices=(device,), links=(), empty_step_s=1e-4)


def test_the_issue_cost_reaches_the_calibration_and_the_cluster():
  cluster = make_worker_cluster(1)
  calibration = calibration_from_benchmark(_bench(15e-6), cluster)
  assert calibration.recv_issue_s == {"CPU": 15e-6}
  assert Calibration.from_dict(calibration.to_dict()) == calibration
  applied = apply_calibration(cluster, calibration)
  assert applied.devices[0].recv_issue_s == 15e-6
  assert "Recv issue 15.0 µs" in _bench(15e-6).describe()
  # A device the profile missed does not count.
  two = dataclasses.replace(_bench(15e-6), devices=(
      _bench(15e-6).devices[0],
      dataclasses.replace(_bench(0.0).devices[0], device=W[1])))
  assert calibration_from_benchmark(
      two, make_worker_cluster(2)).recv_issue_s == {"CPU": 15e-6}
  # Not measured: no figure, and files from before load without one.
  assert calibration_from_benchmark(_bench(0.0), cluster).recv_issue_s == {}
  old = _bench(0.0).to_dict()
  del old["devices"][0]["recv_issue_s"]
  assert ClusterBenchmark.from_dict(old) == _bench(0.0)


def test_a_failed_ring_keeps_the_benchmark(monkeypatch):
  def failing(cluster, config):
    raise MeasureError("worker task 1 died")
  monkeypatch.setattr(recv_issue, "measure_recv_issue", failing)
  bench = _bench(0.0)
  assert recv_issue.with_recv_issue(bench, make_worker_cluster(2),
                                    MeasureConfig()) is bench


def test_only_rendezvous_clusters_are_profiled():
  bench = _bench(0.0)
  # cpu_cluster's devices run ops on several threads: no issue phase, and
  # nothing is measured (no session is opened).
  assert recv_issue.with_recv_issue(bench, cpu_cluster(2),
                                    MeasureConfig(target="grpc://nowhere:1")) is bench


def test_measures_each_workers_issue_cost_from_a_profile():
  with LocalCluster(num_workers=2) as lc:
    cluster = lc.to_cluster()
    issue = recv_issue.measure_recv_issue(
        cluster, MeasureConfig(target=lc.target, steps=2, warmup=1),
        messages=16, repeats=1)
    bench = dataclasses.replace(_bench(0.0), devices=tuple(
        dataclasses.replace(_bench(0.0).devices[0], device=d)
        for d in cluster.device_names))
    with_issue = recv_issue.with_recv_issue(
        bench, cluster, MeasureConfig(target=lc.target, steps=2, warmup=1))
  assert set(issue) == set(cluster.device_names)
  # Starting a RecvTensor call: microseconds (13-29 us here), not 0, not
  # a millisecond.
  assert all(0.0 < s < 1e-3 for s in issue.values()), issue
  assert all(0.0 < d.recv_issue_s < 1e-3 for d in with_issue.devices)


def test_issue_events_of_a_two_worker_profile_by_task(tmp_path):
  import os
  profile = os.path.join(os.path.dirname(__file__), "..", "..", "testdata",
                         "traces", "profile_2workers")
  found = recv_issue.issue_durations(profile)
  # make_traces.py: each worker receives one tensor, so starts one Recv
  # (60 us on task 0, 161 us on task 1 in that profile; the first Recvs of
  # a fresh worker are slow).
  assert sorted(found) == ["/job:worker/replica:0/task:0",
                           "/job:worker/replica:0/task:1"]
  assert [len(v) for v in found.values()] == [1, 1]
  assert found["/job:worker/replica:0/task:0"][0] == pytest.approx(
      60e-6, abs=1e-6)
  assert recv_issue.issue_durations(str(tmp_path)) == {}
