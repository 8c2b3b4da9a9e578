"""End-to-end tests of `tfplace place` (run as a subprocess)."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
GRAPH = os.path.join(ROOT, "testdata", "mlp_2tower.pbtxt")


def run(*args):
  return subprocess.run([sys.executable, "-m", "tfplace.cli.main", "place",
                         *args], capture_output=True, text=True, timeout=120)


def test_place_writes_a_placement(tmp_path):
  out = tmp_path / "p.json"
  proc = run(GRAPH, "--cluster", "k80x2", "--placer", "round_robin",
             "--out", str(out), "--json")
  assert proc.returncode == 0, proc.stderr
  result = json.loads(proc.stdout.strip().splitlines()[-1])
  assert result["placer"] == "round_robin"
  assert result["predicted_step_time_s"] > 0
  data = json.loads(out.read_text())
  assert data["format"] == "tfplace.placement/1"
  assert len(set(data["placement"].values())) == 3  # CPU + 2 GPUs used.
  assert sum(result["ops_per_device"].values()) == len(data["placement"])


def test_bad_input_exits_2_and_writes_nothing(tmp_path):
  out = tmp_path / "p.json"
  proc = run(GRAPH, "--cluster", "k80x2", "--placer", "nope", "--out",
             str(out))
  assert proc.returncode == 2
  assert "unknown placer 'nope'" in proc.stderr
  proc = run(GRAPH, "--cluster", "no_such_cluster", "--placer", "hash",
             "--out", str(out))
  assert proc.returncode == 2
  assert "no_such_cluster" in proc.stderr
  assert not out.exists()
