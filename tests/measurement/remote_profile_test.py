"""Tests for tfplace.measurement.remote_profile and the worker's profiler
port handling (no server processes: fast)."""

import json
import socket
import time

import pytest

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.measurement import remote_profile, worker_main
from tfplace.measurement.local_cluster import LocalCluster, free_ports


def test_window_and_service_addr_by_hand():
  # 2 * 0.3 lead + 3 * 0.1 step + 0.5 margin = 1.4 s.
  assert remote_profile.capture_duration_ms(0.1, lead_s=0.3) == 1400
  assert remote_profile.capture_duration_ms(0.0, lead_s=0.0) == 500
  assert (remote_profile.service_addr(["127.0.0.1:1", "grpc://h:2"]) ==
          "grpc://127.0.0.1:1,grpc://h:2")


def test_unreachable_profiler_is_reported_not_raised(tmp_path):
  steps = []
  port, = free_ports(1)  # nothing listens there
  start = time.monotonic()
  error = remote_profile.capture_remote(
      lambda: steps.append(1), [f"127.0.0.1:{port}"], str(tmp_path),
      step_s=0.0, time_left_s=60.0, lead_s=0.0)
  assert steps == [1]
  assert error and f"127.0.0.1:{port}" in error
  assert time.monotonic() - start < remote_profile.GRACE_S + 2


def test_no_time_left_skips_the_capture(tmp_path):
  steps = []
  error = remote_profile.capture_remote(
      lambda: steps.append(1), ["127.0.0.1:1"], str(tmp_path), step_s=1.0,
      time_left_s=2.0)
  assert steps == [] and "not enough time" in error
  assert remote_profile.capture_remote(
      lambda: None, [], str(tmp_path), 0.0, 60.0).startswith("no profiler")


def test_worker_skips_a_profiler_port_it_cannot_bind():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    busy = s.getsockname()[1]
    assert not worker_main._can_bind(busy)
    assert worker_main._start_profiler(busy) == 0
  assert worker_main._start_profiler(0) == 0
  free, = free_ports(1)
  assert worker_main._can_bind(free)


def test_worker_without_profiler_falls_back_to_its_server(tmp_path):
  lc = LocalCluster(num_workers=2, log_dir=str(tmp_path))
  lc.ports, lc.profiler_ports = [2000, 2001], [3000, 3001]
  (tmp_path / "worker_0.ready.json").write_text(json.dumps(
      {"pid": 1, "profiler_port": 3000}))
  (tmp_path / "worker_1.ready.json").write_text(json.dumps(
      {"pid": 2, "profiler_port": None}))
  lc._check_profilers(timeout_s=0.1)
  assert lc.profiler_ports == [3000, None]
  assert lc.profiler_addresses == ["127.0.0.1:3000", "127.0.0.1:2001"]
  state = lc.state()
  assert state["profiler_ports"] == [3000, None]
  assert state["profiler_addresses"] == lc.profiler_addresses


def test_base_port_gives_profiler_ports_after_the_servers():
  base = None
  for _ in range(20):  # four consecutive free ports
    p, = free_ports(1)
    if all(not _busy(p + i) for i in range(4)):
      base = p
      break
  if base is None:
    pytest.skip("no four consecutive free ports")
  lc = LocalCluster(num_workers=2, base_port=base)
  assert lc._choose_ports() == ([base, base + 1], [base + 2, base + 3])


def _busy(port):
  from tfplace.measurement.local_cluster import port_in_use
  return port_in_use(port)


def test_which_profilers_a_measurement_asks():
  from tfplace.measurement import local_cluster, runner
  from tfplace.measurement.local_cluster import RemoteCluster
  rc = RemoteCluster.from_json('{"worker": ["h1:5", "h2:6"]}')
  assert rc.profiler_addresses == ["h1:5", "h2:6"]
  assert runner._profilers("", None) == ()  # in process: no servers
  assert runner._profilers("grpc://h1:5", None) == ("h1:5",)
  assert runner._profilers("grpc://h1:5", rc.profiler_addresses) == (
      "h1:5", "h2:6")
  lc = local_cluster.LocalCluster(num_workers=1)  # described, not started
  lc.ports, lc.profiler_ports = [9], [10]
  local_cluster._RUNNING["grpc://127.0.0.1:9"] = lc
  try:
    assert runner._profilers("grpc://127.0.0.1:9", None) == ("127.0.0.1:10",)
    assert local_cluster.workers_for("grpc://127.0.0.1:9") == (
        ["127.0.0.1:9"], [])
  finally:
    del local_cluster._RUNNING["grpc://127.0.0.1:9"]


def test_task_names_are_written_beside_the_xplanes(tmp_path):
  run = tmp_path / "plugins" / "profile" / "run"
  run.mkdir(parents=True)
  remote_profile.write_task_names([str(run)], ["127.0.0.1:7001",
                                               "grpc://host2:7002"])
  doc = json.loads((run / remote_profile.TASKS_FILE).read_text())
  assert doc == {"format": remote_profile.TASKS_FORMAT, "tasks": {
      "127.0.0.1_7001": "/job:worker/replica:0/task:0",
      "host2_7002": "/job:worker/replica:0/task:1"}}
