"""Tests for `tfplace measure` and `tfplace cluster` (subprocess CLI runs)."""

import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

import tfplace  # noqa: F401
from tfplace.models.registry import build_model
from tfplace.placement import Placement

import input_graphs


def _tfplace(*args, timeout=240):
  return subprocess.run([sys.executable, "-m", "tfplace.cli.main", *args],
                        capture_output=True, text=True, timeout=timeout)


def test_measure_in_process_json(tmp_path):
  graph = build_model("mlp_towers")
  path = str(tmp_path / "p.json")
  Placement({op.name: "/device:CPU:%d" % (int(graph.group_of[i]) % 2)
             for i, op in enumerate(graph.ops)}).save(path)
  out = _tfplace("measure", "mlp_towers", "--placement", path, "--steps", "2",
                 "--warmup", "0", "--json")
  assert out.returncode == 0, out.stderr[-2000:]
  result = json.loads(out.stdout.strip().splitlines()[-1])
  assert result["median_step_time_s"] > 0
  assert result["devices_match"] is True
  assert len(result["step_times_s"]) == 2


def test_measure_bad_input_exit_2(tmp_path):
  out = _tfplace("measure", "mlp_towers", "--placement",
                 str(tmp_path / "missing.json"))
  assert out.returncode == 2
  assert "no such placement file" in out.stderr


@pytest.mark.parametrize("kind", ["file", "a trace"])
def test_measure_refuses_a_trace_dir_it_would_spoil(tmp_path, kind):
  # A file ended in a traceback after the timed steps; a folder holding an
  # earlier trace had its step_stats.pb replaced and a second profile put
  # beside the first.
  graph = build_model("mlp_towers")
  path = str(tmp_path / "p.json")
  Placement({op.name: "/device:CPU:0" for op in graph.ops}).save(path)
  target = tmp_path / "trace"
  if kind == "file":
    target.write_text("mine")
  else:
    target.mkdir()
    (target / "step_stats.pb").write_bytes(b"earlier")
  out = _tfplace("measure", "mlp_towers", "--placement", path,
                 "--trace_dir", str(target))
  assert out.returncode == 2, out.stderr[-2000:]
  assert ("is a file" if kind == "file" else "is not empty") in out.stderr
  assert "Traceback" not in out.stderr and "median step" not in out.stdout
  assert (target.read_text() == "mine" if kind == "file" else
          (target / "step_stats.pb").read_bytes() == b"earlier")


def test_measure_on_a_stale_state_file_says_the_servers_are_gone(tmp_path):
  # It said "the worker died during the measurement" of servers that were
  # never up.
  from tfplace.measurement.local_cluster import free_ports
  port = free_ports(1)[0]
  state = tmp_path / "cluster.json"
  state.write_text(json.dumps({
      "format": "tfplace.local_cluster/1", "pids": [],
      "cluster_spec": {"worker": [f"127.0.0.1:{port}"]},
      "target": f"grpc://127.0.0.1:{port}"}))
  path = str(tmp_path / "p.json")
  Placement({"x": "/job:worker/replica:0/task:0/device:CPU:0"}).save(path)
  out = _tfplace("measure", "mlp_towers", "--placement", path, "--cluster",
                 str(state))
  assert out.returncode == 2, out.stderr[-2000:]
  assert "not reachable" in out.stderr and "died" not in out.stderr


def test_measure_refuses_a_spec_in_another_order_than_the_servers(tmp_path):
  # It ran, and wrote task 1's profile as task 0's (tasks.json).
  from tfplace.measurement.local_cluster import LocalCluster
  meta, placement = _placeholder_files(tmp_path)
  trace = tmp_path / "trace"
  with LocalCluster(num_workers=2) as servers:
    swapped = servers.cluster_spec["worker"][::-1]
    out = _tfplace("measure", meta, "--placement", placement, "--cluster",
                   json.dumps({"worker": swapped}), "--batch_size", "4",
                   "--trace_dir",
                   str(trace))
  assert out.returncode == 2 and out.stdout == "", out.stderr[-2000:]
  lines = [l for l in out.stderr.splitlines() if l.startswith("tfplace")]
  assert lines == [
      f"tfplace measure: error: the cluster spec lists {swapped[0]} as "
      "/job:worker/task:0, but the server there is /job:worker/task:1 of "
      "its own cluster; give the spec the servers were started with (each "
      "task's address, in task order)"]
  assert not trace.exists()


def _placeholder_files(tmp_path):
  """(graph file, placement file) of the placeholder graph on 2 workers."""
  meta = str(tmp_path / "g.meta")
  graph = input_graphs.placeholder_graph(meta)
  placement = str(tmp_path / "p.json")
  input_graphs.by_group(graph).save(placement)
  return meta, placement


def test_measure_npz_feeds_on_local_workers(tmp_path):
  meta, placement = _placeholder_files(tmp_path)
  np.savez(tmp_path / "f.npz", ids=np.ones((3, 4), np.int32),
           labels=np.array([0, 1, 4], np.int32))
  out = _tfplace("measure", meta, "--placement", placement,
                 "--local_workers", "2", "--steps", "2", "--warmup", "1",
                 "--feeds", str(tmp_path / "f.npz"), "--batch_size", "3",
                 "--json")
  assert out.returncode == 0, out.stderr[-2000:]
  result = json.loads(out.stdout.strip().splitlines()[-1])
  assert result["devices_match"] is True and result["loss"] > 0
  sources = {i["name"]: (i["source"], i["shape"]) for i in result["inputs"]}
  assert sources == {"ids": ("user", [3, 4]), "labels": ("user", [3]),
                     "x": ("synthetic", [3, 6])}
  # The workers' allocators keep statistics: a peak per worker.
  assert sorted(result["peak_memory_bytes"]) == [
      f"/job:worker/replica:0/task:{i}/device:CPU:0" for i in (0, 1)]
  assert all(v > 0 for v in result["peak_memory_bytes"].values())


@pytest.mark.parametrize("feeds,extra,message", [
    ("text", (), "is not an .npz file"),
    ({"x": np.zeros((3, 6), np.float64)}, ("--batch_size", "3"),
     "feed 'x' has dtype float64; the placeholder takes float32"),
    ({"MatMul": np.zeros((3, 6), np.float32)}, ("--batch_size", "3"),
     "'MatMul' is a MatMul op, not a placeholder"),
    (None, (), "'ids' (int32[?, 4]) has an unknown dimension 0"),
])
def test_measure_bad_inputs_exit_2(tmp_path, feeds, extra, message):
  meta, placement = _placeholder_files(tmp_path)
  args = ["measure", meta, "--placement", placement, "--local_workers", "2",
          *extra]
  if feeds == "text":
    (tmp_path / "f.npz").write_text("ids,labels\n1,2\n")
  elif feeds is not None:
    np.savez(tmp_path / "f.npz", **feeds)
  if feeds is not None:
    args += ["--feeds", str(tmp_path / "f.npz")]
  out = _tfplace(*args)
  assert out.returncode == 2, out.stderr[-2000:]
  assert message in out.stderr
  assert "Traceback" not in out.stderr
  assert out.stderr.count("tfplace measure: error:") == 1


@pytest.mark.parametrize("args, message", [
    (["--worker_gpus", "0"], "describe the workers --local_workers starts"),
    (["--cluster", "x.json", "--cores_per_worker", "2"],
     "describe the workers --local_workers starts"),
    (["--local_workers", "2", "--worker_gpus", "0,1,2"],
     "one entry per worker"),
    (["--local_workers", "-1"], "--local_workers must be >= 1")])
def test_measure_refuses_worker_flags_it_cannot_honour(tmp_path, args,
                                                       message):
  placement = str(tmp_path / "p.json")
  Placement({"x": "/job:worker/replica:0/task:0/device:CPU:0"}).save(
      placement)
  out = _tfplace("measure", "mlp_towers", "--placement", placement, *args)
  assert out.returncode == 2, out.stderr[-2000:]
  assert message in out.stderr
  assert "Traceback" not in out.stderr


def test_cluster_status_without_state_is_error(tmp_path):
  out = _tfplace("cluster", "status", "--state", str(tmp_path / "none.json"))
  assert out.returncode == 2
  assert "tfplace cluster up" in out.stderr


@pytest.mark.parametrize("gpus, words", [
    ("0,0", "GPU 0 is given to workers 0 and 1"),
    ("0+x", "'x' is not a GPU id")])
def test_cluster_up_refuses_bad_worker_gpus(tmp_path, gpus, words):
  state = tmp_path / "cluster.json"
  up = _tfplace("cluster", "up", "--workers", "2", "--worker_gpus", gpus,
                "--state", str(state))
  assert up.returncode == 2 and words in up.stderr, up.stderr[-2000:]
  assert not state.exists()


def test_cluster_up_status_down(tmp_path):
  state = str(tmp_path / "cluster.json")
  up = _tfplace("cluster", "up", "--workers", "2", "--state", state)
  assert up.returncode == 0, up.stderr[-2000:]
  try:
    pids = json.load(open(state))["pids"]
    status = _tfplace("cluster", "status", "--state", state, "--json")
    rows = json.loads(status.stdout.strip().splitlines()[-1])["workers"]
    assert [(r["alive"], r["reachable"]) for r in rows] == [(True, True)] * 2
    again = _tfplace("cluster", "up", "--state", state)
    assert again.returncode == 2 and "already up" in again.stderr
  finally:
    down = _tfplace("cluster", "down", "--state", state, "--keep_logs")
  assert down.returncode == 0, down.stderr[-2000:]
  assert "stopped 2 worker(s)" in down.stdout
  assert "worker logs kept in" in down.stdout
  kept = down.stdout.split("worker logs kept in ")[1].strip()
  assert os.path.isfile(os.path.join(kept, "worker_0.log"))
  shutil.rmtree(kept)
  for pid in pids:
    try:
      with open(f"/proc/{pid}/cmdline", "rb") as f:
        assert b"worker_main" not in f.read()
    except OSError:
      pass  # gone


def _cpu_s(pid: int) -> float:
  with open(f"/proc/{pid}/stat") as f:
    fields = f.read().rsplit(")", 1)[1].split()
  return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize("task", [0, 1])
def test_worker_killed_during_measure_then_status_and_down(tmp_path, task):
  # Task 0 is the master: TF waits for it until the run's deadline, so the
  # verb exits at once after its message (run_helpers.exit_now_if_tf_busy).
  state = str(tmp_path / "cluster.json")
  up = _tfplace("cluster", "up", "--workers", "2", "--state", state)
  assert up.returncode == 0, up.stderr[-2000:]
  info = json.load(open(state))
  pids, log_dir = info["pids"], info["log_dir"]
  graph = build_model("mlp_towers")
  placement = str(tmp_path / "p.json")
  Placement({op.name: "/job:worker/replica:0/task:%d/device:CPU:0" % (
      int(graph.group_of[i]) % 2) for i, op in enumerate(graph.ops)}).save(
          placement)
  try:
    run = subprocess.Popen(
        [sys.executable, "-m", "tfplace.cli.main", "measure", "mlp_towers",
         "--placement", placement, "--cluster", state, "--steps", "10000000",
         "--step_timeout_s", "5"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Kill the worker once it is running steps (its CPU time grows).
    start_cpu, deadline = _cpu_s(pids[task]), time.monotonic() + 120
    while (_cpu_s(pids[task]) - start_cpu < 1.0
           and time.monotonic() < deadline):
      time.sleep(0.05)
    os.kill(pids[task], 9)
    killed = time.monotonic()
    out, err = run.communicate(timeout=120)
    assert run.returncode == 2, err[-2000:]
    assert time.monotonic() - killed < 60  # not TF's 300 s deadline
    assert "Traceback" not in err
    lines = [l for l in err.splitlines() if l.startswith("tfplace measure:")]
    assert len(lines) == 1 and f"worker task {task}" in lines[0], err[-2000:]
    assert "timed steps were done (median" in lines[0]
    status = _tfplace("cluster", "status", "--state", state)
    assert status.returncode == 2
    assert f"task {task}" in status.stderr and "dead" in status.stderr
    assert f"task {1 - task}" in status.stdout and "alive" in status.stdout
  finally:
    down = _tfplace("cluster", "down", "--state", state)
  assert down.returncode == 0, down.stderr[-2000:]
  assert "stopped 1 worker(s)" in down.stdout
  assert not os.path.exists(log_dir)


def test_measure_prints_each_peak_beside_the_simulated_one():
  from tfplace.cli.measure_cmd import _memory_line
  worker = "/job:worker/replica:0/task:%d/device:CPU:0"
  gpu = "/job:worker/replica:0/task:0/device:GPU:0"
  assert _memory_line({worker % 1: 3 << 20, gpu: 1 << 30},
                      {worker % 1: 2 << 20}) == (
      f"peak memory: {gpu} 1.0 GiB, {worker % 1} 3.0 MiB (simulated 2.0 MiB)")
  # The CPUs of one process share its allocator: one figure for them all.
  local = "/job:localhost/replica:0/task:0/device:CPU:%d"
  assert _memory_line({local % 0: 5 << 20, local % 1: 6 << 20},
                      {local % 0: 1 << 20}) == (
      "peak memory: /job:localhost/replica:0/task:0 CPUs (one allocator) "
      "6.0 MiB")
  assert "TF_CPU_ALLOCATOR_USE_BFC=true" in _memory_line({}, {})
  # Every placed device is listed: one without a peak says why.
  assert _memory_line({worker % 0: 3 << 20}, {worker % 1: 2 << 20},
                      {worker % 1: "no allocation recorded"}) == (
      f"peak memory: {worker % 0} 3.0 MiB, {worker % 1} (no allocation "
      "recorded; simulated 2.0 MiB)")
  # A placed CPU sharing the allocator of the CPU with the peak.
  assert _memory_line({local % 0: 5 << 20}, {},
                      placed={local % 0, local % 1}) == (
      "peak memory: /job:localhost/replica:0/task:0 CPUs (one allocator) "
      "5.0 MiB")
