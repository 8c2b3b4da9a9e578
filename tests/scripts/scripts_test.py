"""The shipped scripts run: the main job end to end, the others' flags."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
SCRIPTS = os.path.join(ROOT, "scripts")


def _run(args, cwd):
  return subprocess.run([sys.executable] + args, cwd=cwd, capture_output=True,
                        text=True, timeout=300)


def test_main_job_writes_the_best_placement(tmp_path):
  out = tmp_path / "out"
  run = _run([os.path.join(SCRIPTS, "place_model.py"), "--model", "mlp_towers",
              "--cluster", "k80x2", "--placers", "single_gpu,m_etf,metis",
              "--searches", "local_search", "--budget_s", "2",
              "--out_dir", str(out)], cwd=tmp_path)
  assert run.returncode == 0, run.stderr[-2000:]
  comparison = json.loads((out / "comparison.json").read_text())
  times = {r["placer"]: r["step_time_s"] for r in comparison["runs"]}
  assert set(times) == {"single_gpu", "m_etf", "metis", "local_search"}
  search = comparison["runs"][-1]["search"]
  assert search["start"] == min(["single_gpu", "m_etf", "metis"],
                                key=times.get)
  assert times["local_search"] <= min(times.values())
  assert "evaluations/s" in run.stdout
  assert comparison["best_placer"] == min(times, key=times.get)
  best = json.loads((out / "best_placement.json").read_text())
  assert best["metadata"]["placer"] == comparison["best_placer"]
  assert (out / "placed_graph.pb").stat().st_size > 0
  assert "best: " + comparison["best_placer"] in run.stdout
  # TensorFlow's start-up lines stay off a plain run (they came before
  # run_app's filter, from a module-level import).
  assert "0000 00:00" not in run.stderr, run.stderr[-2000:]
  assert "absl::InitializeLog" not in run.stderr, run.stderr[-2000:]
  # Four significant digits: a 0.23 ms step was "0.2 ms (lower bound 0.2 ms)".
  best_ms = f"{times[comparison['best_placer']] * 1e3:.4g} ms per step"
  assert best_ms in run.stdout, run.stdout


def test_main_job_refuses_an_out_dir_that_is_a_file_before_any_work(
    tmp_path):
  # It placed with every placer, then died on os.makedirs with a traceback.
  out = tmp_path / "out"
  out.write_text("keep")
  run = _run([os.path.join(SCRIPTS, "place_model.py"), "--model", "mlp_towers",
              "--cluster", "k80x2", "--placers", "m_etf", "--searches=",
              "--out_dir", str(out)], cwd=tmp_path)
  assert run.returncode == 2, run.stderr[-2000:]
  assert "Traceback" not in run.stderr and "--out_dir" in run.stderr
  assert "is a file" in run.stderr and "best:" not in run.stdout
  assert out.read_text() == "keep"


def test_main_job_help_names_every_learned_placer_it_runs(tmp_path):
  # --searches runs placeto, gdp and mars too; its help named two.
  run = _run([os.path.join(SCRIPTS, "place_model.py"), "--helpshort"],
             cwd=tmp_path)
  help_text = " ".join((run.stdout + run.stderr).split())
  assert "colocrl, hierarchical, placeto, gdp, mars" in help_text, help_text


def test_main_job_rejects_an_unknown_model(tmp_path):
  run = _run([os.path.join(SCRIPTS, "place_model.py"), "--model", "nosuch",
              "--out_dir", str(tmp_path / "out")], cwd=tmp_path)
  assert run.returncode == 2
  assert "unknown model" in run.stderr
  assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("graphs,message", [
    ("small_cnn", "two or more graphs, got 1"),
    ("small_cnn,nosuch", "neither a graph file nor a model name"),
    ("small_cnn,small_cnn", "two graphs one name")])
def test_gdp_train_refuses_bad_graphs_and_writes_nothing(graphs, message,
                                                         tmp_path):
  logdir = tmp_path / "gdp"
  run = _run([os.path.join(SCRIPTS, "gdp_train.py"), "--graphs", graphs,
              "--budget_s", "5", "--logdir", str(logdir)], cwd=tmp_path)
  assert run.returncode == 2 and message in run.stderr, run.stderr[-2000:]
  assert not logdir.exists()


@pytest.mark.parametrize("script", sorted(
    f for f in os.listdir(SCRIPTS) if f.endswith(".py")))
def test_every_script_imports_and_lists_its_flags(script, tmp_path):
  # absl prints the script's own flags for --helpshort (then exits with 1,
  # which run_app turns into 0), with no TensorFlow start-up lines, even
  # from modules that load TensorFlow as the script imports them.
  run = _run([os.path.join(SCRIPTS, script), "--helpshort"], cwd=tmp_path)
  output = run.stdout + run.stderr
  assert run.returncode == 0, output[-2000:]
  assert "Traceback" not in output, output[-2000:]
  assert f"{script}:" in output and "Try --helpfull" in output
  assert "0000 00:00" not in run.stderr, run.stderr[-2000:]
  assert "before absl::InitializeLog()" not in run.stderr


@pytest.mark.parametrize("script,flag,value", [
    ("send_delay.py", "--busy_ops", "x"), ("send_delay.py", "--busy_ops", "-3"),
    ("send_delay.py", "--busy_sides", "both"),
    ("send_delay.py", "--kinds", "conv"),
    ("message_cost.py", "--contexts", "busy"),
    ("message_cost.py", "--few", "0"), ("message_cost.py", "--many", "500"),
    ("message_cost.py", "--steps", "0"),
    ("message_cost.py", "--few", "4"),  # The crossing context: 8, 16...
    ("memory_fidelity.py", "--graphs", "small_cnn,bogus"),
    ("memory_fidelity.py", "--placers", "best"),
    ("message_count.py", "--graphs", "nosuch"),
    ("message_count.py", "--record", "nosuch.json.gz"),
    ("comm_benchmark.py", "--sizes", "4096"),
    ("comm_benchmark.py", "--sizes", "4k,8k"),
    ("comm_benchmark.py", "--consumer", "all"),
    ("comm_benchmark.py", "--knee_bytes", "8192")])
def test_cluster_scripts_refuse_bad_flags_before_starting_a_cluster(
    script, flag, value, tmp_path):
  run = _run([os.path.join(SCRIPTS, script), flag, value], cwd=tmp_path)
  assert run.returncode == 2
  assert f"{flag}" in run.stderr and "Traceback" not in run.stderr


@pytest.mark.parametrize("args, words", [
    (["--in_process", "--worker_gpus", "0"], "drop one"),
    (["--worker_gpus", "0,0"], "GPU 0 is given to workers 0 and 1"),
    (["--workers", "1", "--worker_gpus", "0,1"], "one entry per worker")])
def test_fidelity_refuses_bad_worker_gpus_before_starting(args, words,
                                                           tmp_path):
  run = _run([os.path.join(SCRIPTS, "fidelity.py"), "--cross"] + args,
             cwd=tmp_path)
  assert run.returncode == 2, run.stderr[-2000:]
  assert words in run.stderr and "Traceback" not in run.stderr


@pytest.mark.parametrize("args", [
    ["gpu_steps.py"], ["fidelity.py", "--in_process", "--cross"]])
def test_gpu_scripts_stop_with_a_reason_where_tf_sees_no_gpu(args, tmp_path):
  from tfplace.measurement.local_devices import visible_gpus
  if visible_gpus():
    pytest.skip("this machine has a GPU")
  run = _run([os.path.join(SCRIPTS, args[0])] + args[1:], cwd=tmp_path)
  assert run.returncode == 2, run.stderr[-2000:]
  assert "device:CPU:0" in run.stderr and "GPU" in run.stderr
  assert "Traceback" not in run.stderr


def test_a_script_refuses_positional_arguments(tmp_path):
  # `--replay a.gz b.gz` replayed a.gz alone and said nothing of b.gz.
  records = os.path.join(ROOT, "testdata", "cross_records")
  first, second = (os.path.join(records, name) for name in
                   ("2026-11-25-r01.json.gz", "2026-11-25-r02.json.gz"))
  run = _run([os.path.join(SCRIPTS, "fidelity.py"), "--replay", first,
              second], cwd=tmp_path)
  assert run.returncode == 2, run.stderr[-2000:]
  assert "takes no positional arguments" in run.stderr
  assert "comma-separated" in run.stderr and "replaying" not in run.stdout


def test_a_replay_lists_the_op_types_its_calibration_misses(tmp_path):
  record = os.path.join(ROOT, "testdata", "cross_records",
                        "2026-11-29-r80.json.gz")
  run = _run([os.path.join(SCRIPTS, "fidelity.py"), "--replay", record,
              "--op_types", "2", "--json"], cwd=tmp_path)
  assert run.returncode == 0, run.stderr[-2000:]
  json.loads(run.stdout.strip().splitlines()[-1])  # --json: the last line.
  table = run.stdout[run.stdout.index("## op types of the one-device runs"):]
  table = table[:table.index("\n\n", table.index("|---"))]
  rows = [line.split(" | ") for line in table.splitlines()
          if line.startswith("| ") and not line.startswith("| graph")]
  # Two op types for each of the record's 11 judged graphs, each with a
  # traced and a predicted time.
  assert len(rows) == 2 * 11
  assert {r[0][2:] for r in rows} >= {"resnet_like", "keras_transformer"}
  assert all(float(r[4]) > 0 and float(r[5]) >= 0 for r in rows)


def test_idle_slowdown_reads_a_shipped_record(tmp_path):
  record = os.path.join(ROOT, "testdata", "cross_records",
                        "2026-11-26-r27.json.gz")
  run = _run([os.path.join(SCRIPTS, "idle_slowdown.py"), "--records", record,
              "--json"], cwd=tmp_path)
  assert run.returncode == 0, run.stderr[-2000:]
  rows = json.loads(run.stdout.strip().splitlines()[-1])
  pooled = {r["bucket"]: r for r in rows if r["graph"] == "all"}
  assert set(pooled) == {"< 20 us", "20-100 us", ">= 100 us"}
  assert all(r["num_ops"] > 0 and r["median_ratio"] > 0
             for r in pooled.values())
  missing = _run([os.path.join(SCRIPTS, "idle_slowdown.py"), "--records",
                  str(tmp_path / "none.json.gz")], cwd=tmp_path)
  assert missing.returncode == 2 and "Traceback" not in missing.stderr


@pytest.mark.parametrize("flag,value,words", [
    ("--fractions", "1,abc", "numbers > 0"),
    ("--fractions", "0", "numbers > 0"),
    ("--graphs", "nosuch", "one or more of"),
])
def test_memory_pressure_refuses_bad_flags(flag, value, words, tmp_path):
  run = _run([os.path.join(SCRIPTS, "memory_pressure.py"), flag, value],
             cwd=tmp_path)
  assert run.returncode == 2
  assert words in run.stderr and "Traceback" not in run.stderr


def test_real_run_demo_prints_no_profiler_line(tmp_path):
  # The trace's capture printed TF's "Starting to trace for N ms.
  # Remaining attempt(s): 0" in the middle of the demo's results.
  out = tmp_path / "demo"
  run = _run([os.path.join(SCRIPTS, "demo_real_runs.py"), "--steps", "1",
              "--out_dir", str(out)], cwd=tmp_path)
  assert run.returncode == 0, run.stderr[-2000:]
  assert "Starting to trace" not in run.stdout + run.stderr
  assert "| metis |" in run.stdout and "trace of " in run.stdout
  assert (out / "trace" / "step_stats.pb").stat().st_size > 0
