"""Tests for tfplace.measurement.local_cluster: real TF server processes (slow)."""

import os
import shutil
import socket
import tempfile
import threading
import time

import pytest

import tfplace  # noqa: F401
from tfplace.errors import MeasureError, WorkerDiedError
from tfplace.measurement.local_cluster import (LocalCluster, RemoteCluster,
                                               cluster_from_target,
                                               free_ports, make_worker_cluster,
                                               parse_worker_gpus,
                                               worker_device)
from tfplace.measurement.config import MeasureConfig
from tfplace.measurement.runner import measure
from tfplace.models.registry import build_model
from tfplace.placement import Placement


def _gone(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return True
  # A zombie still answers kill(0); treat it as gone only if reaped.
  with open(f"/proc/{pid}/stat") as f:
    return f.read().split()[2] == "Z"


def test_two_workers_measure_then_dead_worker_then_stop():
  graph = build_model("mlp_towers", num_towers=2, hidden=8, batch_size=4,
                      input_size=8, num_layers=1)
  placement = Placement({op.name: worker_device(int(graph.group_of[i]) % 2)
                         for i, op in enumerate(graph.ops)})
  lc = LocalCluster(num_workers=2, cores_per_worker=1)
  with lc:
    pids = lc.pids
    assert len(pids) == 2 and all(lc.alive())
    # CPU workers: no GPU opened (each would reserve nearly all of it).
    with open(f"/proc/{pids[0]}/environ", "rb") as f:
      environ = f.read() + b"\x00"
    assert b"CUDA_VISIBLE_DEVICES=\x00" in environ
    # TF's BFC CPU allocator: it keeps the statistics peak memory needs.
    assert b"TF_CPU_ALLOCATOR_USE_BFC=true\x00" in environ
    assert lc.target.startswith("grpc://127.0.0.1:")
    cluster = lc.to_cluster()
    assert cluster.device_names == [worker_device(0), worker_device(1)]
    timing = measure(graph, placement, MeasureConfig(
        target=lc.target, warmup=1, steps=3, timeout_s=60), cluster=cluster)
    assert all(t > 0 for t in timing.step_times_s)
    assert timing.devices_match, timing.mismatches[:3]
    assert {r.device for r in timing.op_records} == set(cluster.device_names)
    # Each worker's peak holds at least its variables, and it is not the
    # other's: the ops placed there allocate on their own worker.
    params = {d: 0 for d in cluster.device_names}
    for i, op in enumerate(graph.ops):
      params[placement.devices[op.name]] += int(graph.param_bytes[i])
    assert set(timing.peak_memory_bytes) == set(cluster.device_names)
    for device, peak in timing.peak_memory_bytes.items():
      assert params[device] <= peak < 64 << 20, (device, peak)
    # The servers list their devices: CPUs only here.
    assert cluster_from_target(lc.target).device_names == [
        worker_device(0), worker_device(1)]
    spec = RemoteCluster(lc.cluster_spec).with_listed_gpus()
    assert spec.gpus_per_worker == (0, 0) and spec.gpu_memory_bytes is None
    assert lc.state()["gpus_per_worker"] == [0, 0]
    lc.processes[1].kill()
    lc.processes[1].wait()
    start = time.monotonic()
    with pytest.raises(WorkerDiedError, match="worker task 1 .*exited"):
      measure(graph, placement, MeasureConfig(
          target=lc.target, warmup=0, steps=2, timeout_s=6))
    assert time.monotonic() - start < 20
    log_dir = lc.log_dir
    assert os.path.isfile(os.path.join(log_dir, "worker_0.log"))
  assert lc.processes == []
  assert all(_gone(p) for p in pids)
  # The temporary log folder goes with the cluster, unless kept.
  assert log_dir.startswith(os.path.join(tempfile.gettempdir(),
                                         "tfplace_cluster_"))
  assert not os.path.exists(log_dir)


def _busy_worker(pid: int, cpu_s: float = 1.0, timeout_s: float = 60.0):
  """Waits until process `pid` has used `cpu_s` more CPU seconds (steps are
  running on it)."""
  def cpu():
    with open(f"/proc/{pid}/stat") as f:
      fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
  start, deadline = cpu(), time.monotonic() + timeout_s
  while cpu() - start < cpu_s and time.monotonic() < deadline:
    time.sleep(0.05)


@pytest.mark.parametrize("task", [0, 1])
def test_worker_killed_mid_measurement_is_named_and_steps_kept(task):
  # Task 0 is the master (the session target): TF's client retries it until
  # the deadline; task 1's death makes the master wait for it the same way.
  graph = build_model("mlp_towers", num_towers=2, hidden=8, batch_size=4,
                      input_size=8, num_layers=1)
  placement = Placement({op.name: worker_device(int(graph.group_of[i]) % 2)
                         for i, op in enumerate(graph.ops)})
  with LocalCluster(num_workers=2, keep_logs=True) as lc:
    victim = lc.processes[task]
    killer = threading.Thread(target=lambda: (
        _busy_worker(victim.pid), victim.kill()), daemon=True)
    killer.start()
    start = time.monotonic()
    with pytest.raises(WorkerDiedError) as info:
      measure(graph, placement, MeasureConfig(
          target=lc.target, warmup=1, steps=10 ** 7, step_timeout_s=5))
    elapsed = time.monotonic() - start
  err = info.value
  assert f"worker task {task} ({lc.addresses[task]})" in str(err)
  assert err.dead_tasks and err.dead_tasks[0].startswith(f"worker task {task}")
  # The steps timed before the kill are kept and reported.
  assert len(err.step_times_s) > 0 and all(t > 0 for t in err.step_times_s)
  assert f"{len(err.step_times_s)} of 10000000 timed steps" in str(err)
  # Found by the health check (0.5 s), not by TF's 300 s deadline.
  assert elapsed < 30
  assert os.path.isdir(lc.log_dir)  # keep_logs
  shutil.rmtree(lc.log_dir)


_CLIENT_KILLED = """
import os, sys
import tfplace
from tfplace.measurement.local_cluster import LocalCluster
lc = LocalCluster(num_workers=1).start()
print(lc.pids[0], lc.log_dir, flush=True)
os.kill(os.getpid(), 9)  # killed: no stop(), no atexit
"""


def test_workers_of_a_killed_client_exit():
  # `tfplace measure --local_workers 2` killed with SIGKILL (or aborted by
  # a fatal error) left both TF servers running for good.
  import subprocess
  import sys
  out = subprocess.run([sys.executable, "-c", _CLIENT_KILLED],
                       capture_output=True, text=True, timeout=180)
  assert out.returncode == -9, out.stderr[-2000:]
  pid, log_dir = out.stdout.split()
  pid = int(pid)
  deadline = time.monotonic() + 60
  while not _gone(pid) and time.monotonic() < deadline:
    time.sleep(0.2)
  gone = _gone(pid)
  if not gone:
    os.kill(pid, 9)
  shutil.rmtree(log_dir, ignore_errors=True)
  assert gone, "the worker outlived the client that started it"


def test_cluster_up_workers_are_not_tied_to_the_client():
  lc = LocalCluster(num_workers=1, detached=True)
  assert "--parent_pid" not in lc._worker_command(0, [0], "{}", "ready")
  attached = LocalCluster(num_workers=1)
  command = attached._worker_command(0, [0], "{}", "ready")
  assert command[-2:] == ["--parent_pid", str(os.getpid())]


def test_base_port_in_use_is_a_clear_error():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    with pytest.raises(MeasureError, match="in use"):
      LocalCluster(num_workers=1, base_port=port).start()


def test_worker_gpus_parse_one_entry_per_worker():
  assert parse_worker_gpus(["0+1", "none", "2"], 4) == ((0, 1), (), (2,), ())
  assert parse_worker_gpus([], 2) == ((), ())
  with pytest.raises(MeasureError, match="one entry per worker"):
    parse_worker_gpus(["0", "1", "2"], 2)
  with pytest.raises(MeasureError, match="GPU 0 is given to workers 0 and 1"):
    parse_worker_gpus(["0", "0"], 2)
  with pytest.raises(MeasureError, match="'x' is not a GPU id"):
    parse_worker_gpus(["x"], 2)


def test_worker_cluster_with_gpus_links_each_gpu_to_its_worker():
  cluster = make_worker_cluster(2, cores_per_worker=4, gpus_per_worker=(2, 0))
  gpu0, gpu1 = (worker_device(0, kind="GPU", index=j) for j in (0, 1))
  assert cluster.device_names == [worker_device(0), gpu0, gpu1,
                                  worker_device(1)]
  assert [d.type for d in cluster.devices] == ["CPU", "GPU", "GPU", "CPU"]
  assert {(l.src, l.dst, l.kind) for l in cluster.links} == {
      (worker_device(0), gpu0, "pcie"), (worker_device(0), gpu1, "pcie")}
  # PCIe within a worker, gRPC over loopback between workers.
  bandwidth = cluster.link_bandwidth
  assert bandwidth[0, 1] > bandwidth[1, 3]
  assert not cluster.rendezvous_transfers
  assert make_worker_cluster(2).rendezvous_transfers
  assert cluster.devices[1].memory_bytes == 16e9  # a V100's, until listed
  remote = RemoteCluster.from_json(
      '{"worker": ["127.0.0.1:1", "127.0.0.1:2"]}', 4, (1, 0), 141e9)
  assert remote.to_cluster().device_names == [worker_device(0), gpu0,
                                              worker_device(1)]
  assert remote.to_cluster().devices[1].memory_bytes == 141e9


def test_worker_given_a_gpu_it_lacks_is_a_clear_error():
  lc = LocalCluster(num_workers=1, worker_gpus=[[7]])
  with pytest.raises(MeasureError, match="worker 0 was given GPU.s. 7 but "
                     "its TensorFlow lists 0 GPU"):
    lc.start()
  assert lc.processes == []
  # Its log is kept: it says what TensorFlow saw.
  assert os.path.isfile(os.path.join(lc.log_dir, "worker_0.log"))
  shutil.rmtree(lc.log_dir)


def test_remote_cluster_spec_parsing():
  rc = RemoteCluster.from_json('{"worker": ["127.0.0.1:1", "127.0.0.1:2"]}')
  assert rc.target == "grpc://127.0.0.1:1"
  assert rc.to_cluster().num_devices == 2
  with pytest.raises(MeasureError):
    RemoteCluster.from_json('{"ps": []}')


def test_trace_dir_has_an_xplane_per_worker(tmp_path):
  from tfplace.trace.reader import load_trace
  graph = build_model("mlp_towers", num_towers=2, hidden=8, batch_size=4,
                      input_size=8, num_layers=1)
  placement = Placement({op.name: worker_device(int(graph.group_of[i]) % 2)
                         for i, op in enumerate(graph.ops)})
  with LocalCluster(num_workers=2) as lc:
    assert all(lc.profiler_ports)
    assert lc.state()["profiler_ports"] == lc.profiler_ports
    timing = measure(graph, placement, MeasureConfig(
        target=lc.target, warmup=1, steps=2, timeout_s=60),
                     trace_dir=str(tmp_path / "ok"))
    # A profiler nobody serves: reported, and the step stats are still kept.
    dead, = free_ports(1)
    bad = measure(graph, placement, MeasureConfig(
        target=lc.target, warmup=0, steps=1, timeout_s=60),
                  trace_dir=str(tmp_path / "bad"),
                  profiler_addresses=[f"127.0.0.1:{dead}"])
  assert timing.profile_error is None
  trace = load_trace(str(tmp_path / "ok" / "plugins" / "profile"))
  # Each worker's xplane is named by its task (tasks.json beside them).
  workers = [worker_device(task) for task in range(2)]
  assert set(trace.devices()) == set(workers)
  for task, device in enumerate(workers):
    ran = {e.name for e in trace.events_on(device)} & set(placement.devices)
    placed = {n for n, d in placement.devices.items()
              if d == worker_device(task)}
    assert ran and ran <= placed, (task, sorted(ran - placed)[:5])
  assert bad.profile_error and str(dead) in bad.profile_error
  assert len(bad.step_times_s) == 1
  assert set(load_trace(str(tmp_path / "bad")).devices()) >= {
      worker_device(0), worker_device(1)}


def test_shared_cores_says_when_pinned_workers_would_share():
  from tfplace.measurement.local_cluster import shared_cores
  assert shared_cores(2, 1, 2) is None and shared_cores(2, 2, 4) is None
  # `cluster up --workers 3` on 2 cores pinned task 2 beside task 0 silently.
  assert "3 worker(s) x 1 core(s) need 3 cores, and 2" in shared_cores(3, 1, 2)
  assert "need 4 cores" in shared_cores(2, 2, 2)


def test_servers_on_several_hosts_talk_over_the_network():
  from tfplace.cost.calibrated import Calibration, check_calibration_matches
  from tfplace.cost.cluster import LinkSpec
  from tfplace.errors import ClusterError
  from tfplace.measurement.local_cluster import RemoteCluster
  one_host = RemoteCluster({"worker": ["127.0.0.1:2222",
                                       "localhost:2223"]}).to_cluster()
  assert one_host.default_link.kind == "loopback" and not one_host.links
  two_hosts = RemoteCluster({"worker": ["10.1.2.3:2222", "10.9.8.7:2222",
                                        "10.1.2.3:2223"]}).to_cluster()
  assert two_hosts.default_link.kind == "network"
  # Tasks 0 and 2 share a host: their messages stay host work.
  assert [(l.src, l.dst, l.kind) for l in two_hosts.links] == [
      (two_hosts.device_names[0], two_hosts.device_names[2], "loopback")]
  assert two_hosts.host_latency[0, 2] > 0 and two_hosts.host_latency[0, 1] == 0
  # A calibration of workers on one host, applied to workers with the same
  # device names on two hosts, was taken silently.
  local = Calibration(links={"loopback": LinkSpec(1e-4, 1e9, "loopback")})
  check_calibration_matches(local, one_host)
  apart = RemoteCluster({"worker": ["10.1.2.3:2222",
                                    "10.9.8.7:2222"]}).to_cluster()
  assert apart.device_names == one_host.device_names
  with pytest.raises(ClusterError, match="over loopback links"):
    check_calibration_matches(local, apart)
