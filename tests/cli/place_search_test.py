"""`tfplace place` with the search placers: budget, start, Ctrl-C, bad input."""

import json
import os
import select
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
GRAPH = os.path.join(ROOT, "testdata", "mlp_2tower.pbtxt")
OTHER_GRAPH = os.path.join(ROOT, "testdata", "matmul_relu_sum.pbtxt")
COMMAND = [sys.executable, "-m", "tfplace.cli.main", "place"]


def run(*args):
  return subprocess.run(COMMAND + list(args), capture_output=True, text=True,
                        timeout=300)


def test_a_search_writes_its_best_placement_and_figures(tmp_path):
  out = tmp_path / "p.json"
  proc = run(GRAPH, "--cluster", "k80x4", "--placer", "local_search",
             "--budget_s", "1", "--init", "round_robin", "--out", str(out),
             "--json")
  assert proc.returncode == 0, proc.stderr
  result = json.loads(proc.stdout.strip().splitlines()[-1])
  search = result["search"]
  assert search["start"] == "round_robin" and search["evaluations"] > 10
  assert result["predicted_step_time_s"] <= search["start_step_time_s"]
  assert json.loads(out.read_text())["metadata"]["search"]["algorithm"] == (
      "local_search")


def test_bad_budgets_and_misplaced_flags_exit_2_and_write_nothing(tmp_path):
  out = tmp_path / "p.json"
  for args, message in [
      (["--budget_s", "0"], "positive number of seconds"),
      (["--budget_s", "-5"], "positive number of seconds"),
      (["--placer_options", "max_evaluations=-1"], "max_evaluations"),
      (["--placer", "m_etf", "--budget_s", "5"], "--budget_s is for search"),
  ]:
    placer = [] if "--placer" in args else ["--placer", "local_search"]
    proc = run(GRAPH, "--cluster", "k80x4", *placer, *args, "--out", str(out))
    assert proc.returncode == 2, (args, proc.stderr)
    assert message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
  assert not out.exists()


def _save_placement(graph_file, cluster_name, path):
  from tfplace import pipeline
  from tfplace.cost.presets import load_cluster
  from tfplace.graph.importers import import_graph
  pipeline.place(import_graph(graph_file), load_cluster(cluster_name),
                 "round_robin").save(str(path))


def test_a_start_placement_for_another_graph_or_cluster_exits_2(tmp_path):
  start, other = tmp_path / "start.json", tmp_path / "other.json"
  _save_placement(GRAPH, "k80x2", start)
  _save_placement(OTHER_GRAPH, "k80x4", other)
  out = tmp_path / "p.json"
  proc = run(GRAPH, "--cluster", "k80x4", "--placer", "local_search",
             "--budget_s", "1", "--init", str(start), "--out", str(out))
  assert proc.returncode == 2, proc.stderr
  assert "was made for another cluster" in proc.stderr, proc.stderr
  assert not out.exists()
  # The same checks in process (faster): another graph, a missing file.
  from tfplace.cost.presets import load_cluster
  from tfplace.errors import PlacementError
  from tfplace.graph.importers import import_graph
  from tfplace.placers.problem import PlacementProblem
  from tfplace.placers.search_support import start_placement
  problem = PlacementProblem.build(import_graph(GRAPH), load_cluster("k80x4"))
  for init, message in [(other, "was made for another graph"),
                        (tmp_path / "missing.json", "no such placement file"),
                        ("no_such_placer", "init must be best_heuristic")]:
    try:
      start_placement(problem, str(init))
    except PlacementError as e:
      assert message in str(e)
    else:
      raise AssertionError(f"{init} was accepted")


def test_a_cluster_where_nothing_fits_exits_2(tmp_path):
  cluster = {"name": "tiny", "devices": [
      {"name": f"/device:CPU:{i}", "type": "CPU", "peak_flops": 1e11,
       "memory_bandwidth": 2e10, "memory_bytes": 64} for i in range(2)]}
  path = tmp_path / "tiny.json"
  path.write_text(json.dumps(cluster))
  out = tmp_path / "p.json"
  proc = run(GRAPH, "--cluster", str(path), "--placer", "cross_entropy",
             "--budget_s", "1", "--out", str(out))
  assert proc.returncode == 2, proc.stderr
  assert "memory" in proc.stderr and "Traceback" not in proc.stderr
  assert not out.exists()


def _wait_for(proc, text: bytes, timeout: float) -> bytes:
  """Reads proc.stderr until `text` shows up (the search has started; `-v 0`
  lets its progress bar through unfiltered)."""
  seen, deadline = b"", time.time() + timeout
  while text not in seen and time.time() < deadline:
    ready, _, _ = select.select([proc.stderr], [], [], 1.0)
    if ready:
      chunk = os.read(proc.stderr.fileno(), 65536)
      if not chunk:
        break
      seen += chunk
  return seen


def test_ctrl_c_writes_the_best_so_far_and_exits_130(tmp_path):
  out = tmp_path / "p.json"
  proc = subprocess.Popen(
      COMMAND + [GRAPH, "--cluster", "k80x4", "--placer", "local_search",
                 "--budget_s", "120", "--init", "round_robin",
                 "--out", str(out), "-v", "0"], stdout=subprocess.PIPE,
      stderr=subprocess.PIPE)
  try:
    seen = _wait_for(proc, b"best ", timeout=120)
    assert b"best " in seen, seen.decode()[-2000:]
    time.sleep(0.5)
    started = time.time()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
  finally:
    proc.kill()
  assert proc.returncode == 130, (seen + err).decode()[-2000:]
  assert time.time() - started < 30  # Not the 120-s budget.
  data = json.loads(out.read_text())
  assert data["metadata"]["search"]["interrupted"] is True
  assert data["metadata"]["predicted_step_time_s"] <= (
      data["metadata"]["search"]["start_step_time_s"])
  assert b"interrupted" in err


def test_the_search_line_names_each_stage():
  from tfplace.cli.place_cmd import _search_line
  search = {"start_step_time_s": 0.2, "start": "m_etf", "step_time_s": 0.1,
            "evaluations": 30, "seconds": 1.0, "evaluations_per_s": 30.0,
            "stages": [{"stage": "units", "groups": 12, "evaluations": 10,
                        "seconds": 0.3, "step_time_s": 0.15},
                       {"stage": "colocation groups", "groups": 400,
                        "evaluations": 20, "seconds": 0.7,
                        "step_time_s": 0.1}]}
  line = _search_line(search)
  assert line.startswith("search: start 200.000 ms (m_etf), best 100.000 ms")
  assert line.endswith("; units (12): 150.000 ms after 10 evaluations, then "
                       "colocation groups (400): 100.000 ms after 20 "
                       "evaluations")
  assert "units" not in _search_line(dict(search, stages=[]))


def test_the_search_line_says_when_the_start_was_written():
  # cp_sat printed "start 35.870 ms (critical_path ...), best 35.893 ms" and
  # wrote the start: the line read as if a slower placement was written.
  from tfplace.cli.place_cmd import _search_line
  search = {"start_step_time_s": 0.03587, "start": "critical_path",
            "step_time_s": 0.035893, "evaluations": 45, "seconds": 0.9,
            "evaluations_per_s": 50.0, "returned_start": True}
  line = _search_line(search)
  assert "best 35.893 ms" in line
  assert "no faster than the start, so the start was written" in line
  assert "start was written" not in _search_line(
      dict(search, step_time_s=0.03, returned_start=False))


def test_the_search_line_says_when_the_search_was_resumed():
  # A resumed search looked like a fresh one, its figures over every run.
  from tfplace.cli.place_cmd import _search_line
  search = {"start_step_time_s": 0.2, "start": "m_etf", "step_time_s": 0.1,
            "evaluations": 30, "seconds": 1.0, "evaluations_per_s": 30.0}
  assert "resumed" in _search_line(dict(search, resumed=True))
  assert "resumed" not in _search_line(dict(search, resumed=False))
