"""`tfplace clusters` and `tfplace simulate`, run as subprocesses."""

import json
import os
import subprocess
import sys

import pytest

import tfplace  # noqa: F401

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
GRAPH = os.path.join(ROOT, "testdata", "matmul_relu_sum.pbtxt")
CLUSTER = os.path.join(ROOT, "testdata", "clusters", "two_cpus.json")
CPU = "/job:localhost/replica:0/task:0/device:CPU:{}"


def tfplace_cmd(*args):
  return subprocess.run([sys.executable, "-m", "tfplace", *args],
                        capture_output=True, text=True, timeout=120)


def test_clusters_lists_presets_as_json():
  r = tfplace_cmd("clusters", "--json")
  assert r.returncode == 0, r.stderr
  rows = {row["name"]: row for row in json.loads(r.stdout)["presets"]}
  assert rows["k80x4"]["device_types"] == {"CPU": 1, "GPU": 4}
  assert rows["2hosts_4gpu"]["num_devices"] == 10


def test_clusters_show_unknown_exits_2():
  r = tfplace_cmd("clusters", "--show", "nope")
  assert r.returncode == 2 and "k80x2" in r.stderr


def test_simulate_json_counts_the_one_remote_tensor(tmp_path):
  importers = pytest.importorskip("tfplace.graph.importers")
  graph = importers.import_graph(GRAPH)
  # x on CPU:1, everything else on CPU:0: only x's output crosses the link
  # (0.5 s latency + bytes / 100 B/s in two_cpus.json).
  placement = {op.name: CPU.format(1 if op.name == "x" else 0)
               for op in graph.ops}
  path = tmp_path / "p.json"
  path.write_text(json.dumps({"placement": placement}))
  r = tfplace_cmd("simulate", GRAPH, "--cluster", CLUSTER, "--placement",
                  str(path), "--json")
  assert r.returncode == 0, r.stderr
  out = json.loads(r.stdout)
  nbytes = graph.op("x").total_output_bytes
  assert out["bytes_moved"] == nbytes and out["feasible"]
  assert out["step_time_s"] >= 0.5 + nbytes / 100.0
  assert out["lower_bound_s"] < 1e-3
  assert set(out["peak_memory_bytes"]) == {CPU.format(0), CPU.format(1)}
  assert set(out["device_busy_s"]) == {CPU.format(0), CPU.format(1)}

  r = tfplace_cmd("simulate", GRAPH, "--cluster", "k80x2", "--placement",
                  str(path))
  assert r.returncode == 2 and "CPU:1" in r.stderr
