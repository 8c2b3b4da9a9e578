"""Tests for `tfplace measure` and `tfplace cluster` (subprocess CLI runs)."""

import json
import subprocess
import sys

import tfplace  # noqa: F401
from tfplace.models.registry import build_model
from tfplace.placement import Placement


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


def test_cluster_status_without_state_is_error(tmp_path):
  out = _tfplace("cluster", "status", "--state", str(tmp_path / "none.json"))
  assert out.returncode == 2
  assert "tfplace cluster up" in out.stderr


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
    down = _tfplace("cluster", "down", "--state", state)
  assert down.returncode == 0, down.stderr[-2000:]
  assert "stopped 2 worker(s)" in down.stdout
  for pid in pids:
    try:
      with open(f"/proc/{pid}/cmdline", "rb") as f:
        assert b"worker_main" not in f.read()
    except OSError:
      pass  # gone
