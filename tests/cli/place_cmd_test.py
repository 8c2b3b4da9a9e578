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


def _tiny_gpu_cluster(tmp_path):
  """A CPU with room for everything and a GPU with room for nothing."""
  cluster = {
      "name": "tiny_gpu",
      "devices": [
          {"name": "/device:CPU:0", "type": "CPU", "peak_flops": 1e11,
           "memory_bandwidth": 2e10, "memory_bytes": 8e9},
          {"name": "/device:GPU:0", "type": "GPU", "peak_flops": 1e12,
           "memory_bandwidth": 2e11, "memory_bytes": 64}],
      "default_link": {"latency_s": 1e-5, "bandwidth": 1e10}}
  path = tmp_path / "tiny_gpu.json"
  path.write_text(json.dumps(cluster))
  return str(path)


def test_infeasible_placement_is_an_error_and_keeps_the_old_file(tmp_path):
  out = tmp_path / "p.json"
  out.write_text("old")
  cluster = _tiny_gpu_cluster(tmp_path)
  proc = run(GRAPH, "--cluster", cluster, "--placer", "single_gpu", "--out",
             str(out))
  assert proc.returncode == 2
  assert "does not fit in memory" in proc.stderr
  assert "GPU:0" in proc.stderr and "--allow_infeasible" in proc.stderr
  assert out.read_text() == "old"
  proc = run(GRAPH, "--cluster", cluster, "--placer", "single_gpu", "--out",
             str(out), "--allow_infeasible", "--json")
  assert proc.returncode == 0, proc.stderr
  assert json.loads(proc.stdout.strip().splitlines()[-1])["feasible"] is False
  assert json.loads(out.read_text())["metadata"]["feasible"] is False


def test_placer_options_reach_the_placer_and_bad_ones_are_named(tmp_path):
  out = tmp_path / "p.json"
  proc = run(GRAPH, "--cluster", "k80x2", "--placer", "m_etf",
             "--placer_options", "use_cpu=true,memory_fraction=0.5",
             "--out", str(out), "--json")
  assert proc.returncode == 0, proc.stderr
  proc = run(GRAPH, "--cluster", "k80x2", "--placer", "m_etf",
             "--placer_options", "colour=red", "--out", str(out) + "2")
  assert proc.returncode == 2
  assert "has no option colour" in proc.stderr
  assert not os.path.exists(str(out) + "2")


def test_help_lists_every_placer_with_its_options():
  proc = subprocess.run([sys.executable, "-m", "tfplace.cli.main", "place",
                         "--help"], capture_output=True, text=True, timeout=120)
  assert proc.returncode == 0
  assert "m_etf (heuristic)" in proc.stdout
  assert "memory_fraction (float, default 1.0)" in proc.stdout


def test_learned_placer_flags(tmp_path):
  out, logdir = tmp_path / "p.json", tmp_path / "search"
  proc = run(GRAPH, "--cluster", "k80x2", "--placer", "m_etf", "--agent",
             "ppo", "--out", str(out))
  assert proc.returncode == 2
  assert "--agent is for learned placers" in proc.stderr
  proc = run(GRAPH, "--cluster", "k80x2", "--placer", "colocrl", "--resume",
             "--out", str(out))
  assert proc.returncode == 2 and "resume needs a logdir" in proc.stderr
  proc = run(GRAPH, "--cluster", "k80x2", "--placer", "colocrl", "--agent",
             "reinforce", "--budget_s", "600", "--max_samples", "32",
             "--init", "m_etf", "--placer_options", "hidden=8,progress=false",
             "--logdir", str(logdir), "--out", str(out), "--json")
  assert proc.returncode == 0, proc.stderr
  result = json.loads(proc.stdout.strip().splitlines()[-1])
  assert result["placer"] == "colocrl" and result["feasible"]
  search = json.loads(out.read_text())["metadata"]["search"]
  assert search["samples"] == 32 and search["start"] == "m_etf"
  # The search placers' figures, under the same keys.
  assert search["step_time_s"] <= search["start_step_time_s"]
  assert search["evaluations"] >= 1 and not search["interrupted"]
  assert (logdir / "best_placement.json").exists()
  assert (logdir / "best_placement.pbtxt").exists()
  proc = run(GRAPH, "--cluster", "k80x2", "--placer", "colocrl",
             "--logdir", str(logdir), "--out", str(out))
  assert proc.returncode == 2 and "--resume" in proc.stderr


def test_seed_on_a_deterministic_placer_is_a_warning(tmp_path):
  out = tmp_path / "p.json"
  proc = run(GRAPH, "--cluster", "k80x2", "--placer", "round_robin",
             "--seed", "3", "--out", str(out))
  assert proc.returncode == 0, proc.stderr
  assert "--seed has no effect on round_robin" in proc.stderr
  proc = run(GRAPH, "--cluster", "k80x2", "--placer", "hash", "--seed", "3",
             "--out", str(tmp_path / "h.json"))
  assert proc.returncode == 0, proc.stderr
  assert "--seed has no effect" not in proc.stderr


def test_a_negative_seed_is_one_error_line(tmp_path):
  # numpy refused it deep in the search with a ValueError traceback.
  out = tmp_path / "p.json"
  proc = run(GRAPH, "--cluster", "k80x2", "--placer", "local_search",
             "--budget_s", "1", "--seed", "-1", "--out", str(out))
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert "Traceback" not in proc.stderr and "--seed=-1" in proc.stderr
  assert not out.exists()
