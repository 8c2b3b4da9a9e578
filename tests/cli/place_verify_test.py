"""`tfplace place --verify_top_k K --target T`: the measured best written,
and bad targets or calibrations refused before any search (exit 2); a
calibration made for another cluster is refused without --verify_top_k too."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
GRAPH = os.path.join(ROOT, "testdata", "mlp_2tower.pbtxt")
COMMAND = [sys.executable, "-m", "tfplace.cli.main", "place", GRAPH]


def run(*args):
  return subprocess.run(COMMAND + list(args), capture_output=True, text=True,
                        timeout=300)


@pytest.fixture()
def two_cpus(tmp_path):
  """A cluster JSON of two in-process CPU devices."""
  from tfplace.cost.presets import cpu_cluster
  path = tmp_path / "cpu2.json"
  path.write_text(cpu_cluster(2).to_json())
  return str(path)


def test_verify_and_fine_tune_write_the_measured_best_with_reports(
    tmp_path, two_cpus):
  out = tmp_path / "p.json"
  proc = run("--cluster", two_cpus, "--placer", "local_search", "--budget_s",
             "0.5", "--init", "round_robin", "--verify_top_k", "2",
             "--target", "local", "--verify_rounds", "1", "--verify_steps",
             "2", "--real_reward", "--real_budget_s", "3", "--out", str(out),
             "--json")
  assert proc.returncode == 0, proc.stderr
  printed = json.loads(proc.stdout.strip().splitlines()[-1])
  verify, real = printed["verify"], printed["real_reward"]
  assert real["search"]["evaluations"] >= 1 and real["seconds"] < 30
  assert json.loads(out.read_text())["metadata"]["real_reward"] == real
  labels = [c["label"] for c in verify["candidates"]]
  assert labels[:2] == ["local_search #1", "local_search #2"]
  assert all(c["measured_s"] > 0 for c in verify["candidates"])
  saved = json.loads(out.read_text())["metadata"]["verify"]
  assert saved == verify
  ratios = [c["ratio"] for c in verify["candidates"]]
  fastest = ratios.index(min(ratios))
  assert verify["chosen"] in (fastest, verify["reference"])
  assert verify["duel_candidate"] in (None, fastest)


def test_target_local_on_local_n_verifies_placements_over_n_cpus(tmp_path):
  # `--cluster local` is one CPU, where every placement is the same one:
  # it verified one placement, and only a cluster JSON gave more CPUs.
  out = tmp_path / "p.json"
  proc = run("--cluster", "local:2", "--placer", "m_etf", "--verify_top_k",
             "2", "--target", "local", "--verify_rounds", "1",
             "--verify_steps", "1", "--out", str(out), "--json")
  assert proc.returncode == 0, proc.stderr
  verify = json.loads(proc.stdout.strip().splitlines()[-1])["verify"]
  assert len(verify["candidates"]) >= 2
  devices = set(json.loads(out.read_text())["placement"].values())
  assert devices == {"/job:localhost/replica:0/task:0/device:CPU:%d" % i
                     for i in (0, 1)}
  assert "one device" not in proc.stderr
  proc = run("--cluster", "local", "--placer", "m_etf", "--verify_top_k",
             "2", "--target", "local", "--verify_rounds", "1",
             "--verify_steps", "1", "--out", str(tmp_path / "one.json"))
  assert proc.returncode == 0, proc.stderr
  warned = [l for l in proc.stderr.splitlines() if "one device" in l]
  assert len(warned) == 1 and "--cluster local:N gives" in warned[0]


def test_an_unreachable_target_exits_2_before_the_search(tmp_path, two_cpus):
  out = tmp_path / "p.json"
  spec = json.dumps({"worker": ["127.0.0.1:1", "127.0.0.1:2"]})
  proc = run("--cluster", spec, "--placer", "local_search", "--budget_s",
             "60", "--verify_top_k", "3", "--target", spec, "--out", str(out))
  assert proc.returncode == 2, proc.stderr
  assert "not reachable" in proc.stderr and "Traceback" not in proc.stderr
  assert "local_search" not in proc.stdout  # no search ran
  assert not out.exists()
  proc = run("--cluster", two_cpus, "--verify_top_k", "3", "--out", str(out))
  assert proc.returncode == 2 and "need --target" in proc.stderr


def test_a_target_of_no_known_form_is_named_as_the_target(tmp_path,
                                                         two_cpus):
  # It said "--cluster 'k80x2' is neither ..." of a good --cluster.
  out = tmp_path / "p.json"
  proc = run("--cluster", two_cpus, "--verify_top_k", "2", "--target",
             "k80x2", "--out", str(out))
  assert proc.returncode == 2, proc.stderr
  assert "--target 'k80x2' is neither" in proc.stderr
  assert "grpc://host:port or local" in proc.stderr
  assert "--cluster" not in proc.stderr and not out.exists()


@pytest.mark.parametrize("verify", [
    ("--verify_top_k", "2", "--target", "local"), ()])
def test_a_calibration_for_another_cluster_exits_2_and_overwrites_nothing(
    tmp_path, two_cpus, verify):
  calibration = tmp_path / "cal.json"
  calibration.write_text(json.dumps({
      "format": "tfplace.calibration/1",
      "run_overhead_s": {"/job:worker/replica:0/task:0/device:CPU:0": 1e-4}}))
  out = tmp_path / "p.json"
  out.write_text("keep me")
  proc = run("--cluster", two_cpus, "--calibration", str(calibration),
             *verify, "--out", str(out))
  assert proc.returncode == 2, proc.stderr
  assert "made for another cluster" in proc.stderr
  assert out.read_text() == "keep me"


def test_target_local_on_a_cluster_of_servers_says_what_to_give(tmp_path):
  # It said "pass --target or --local_workers to measure on a server
  # cluster" (place has no --local_workers, and --target was given), then
  # "(in process the devices are ...; or give a target of TF servers)".
  out = tmp_path / "p.json"
  spec = json.dumps({"worker": ["127.0.0.1:1", "127.0.0.1:2"]})
  proc = run("--cluster", spec, "--verify_top_k", "2", "--target", "local",
             "--out", str(out))
  assert proc.returncode == 2, proc.stderr
  error = proc.stderr.strip().splitlines()[-1]
  assert "the target 'local' runs the steps in this process" in error
  assert "names devices of TF servers" in error
  assert "/job:worker/replica:0/task:0/device:CPU:0 and 1 more" in error
  assert "give them as the target too" in error
  assert "--local_workers" not in error and not out.exists()


def test_the_target_flag_says_what_local_runs_on():
  proc = subprocess.run([sys.executable, "-m", "tfplace.cli.main", "place",
                         "--help"], capture_output=True, text=True,
                        timeout=120)
  assert proc.returncode == 0, proc.stderr
  text = " ".join(proc.stdout.split())
  assert "local: this process, on the /job:localhost devices of --cluster" \
      " (e.g. --cluster local:2, two logical CPUs)" in text


@pytest.mark.parametrize("flag, value", [
    ("--verify_top_k", "-1"), ("--verify_top_k", "17"),
    ("--verify_steps", "0"), ("--verify_rounds", "0"),
    ("--real_budget_s", "0"), ("--real_confirm_rounds", "-1")])
def test_bad_real_run_flags_are_named_as_flags(tmp_path, two_cpus, flag,
                                               value):
  # They were named as the library's fields: "top_k must be 1 to 16",
  # "steps must be an integer >= 1", "rounds must be >= 1 and duel_rounds
  # >= 0" (no such flag), "the real-run budget must be ...".
  out = tmp_path / "p.json"
  out.write_text("keep me")
  real = ("--real_reward",) if flag.startswith("--real") else (
      "--verify_top_k", "2")
  proc = run("--cluster", two_cpus, *real, "--target", "local", flag, value,
             "--out", str(out))
  assert proc.returncode == 2, proc.stderr
  assert f"flag {flag}=" in proc.stderr.strip().splitlines()[-1]
  assert out.read_text() == "keep me"


def test_a_target_spec_in_another_order_than_the_servers_exits_2(tmp_path):
  # The task check moved from the CLI into place_on_target: it still stops
  # `place --target` before the search, in one line, asking each server once.
  from tfplace.measurement.local_cluster import LocalCluster
  out = tmp_path / "p.json"
  with LocalCluster(num_workers=2) as servers:
    swapped = json.dumps({"worker": servers.cluster_spec["worker"][::-1]})
    proc = run("--cluster", swapped, "--placer", "m_etf", "--verify_top_k",
               "2", "--target", swapped, "--out", str(out))
  assert proc.returncode == 2, proc.stderr
  errors = [l for l in proc.stderr.splitlines() if "error:" in l]
  assert len(errors) == 1 and "but the server there is /job:worker/task:1 " \
      "of its own cluster" in errors[0], proc.stderr
  assert "Traceback" not in proc.stderr and not out.exists()
