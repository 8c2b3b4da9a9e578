"""`tfplace cluster status --cluster_spec`: which task each server serves
(subprocess CLI runs on a local 2-worker cluster)."""

import json
import subprocess
import sys

import pytest

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.measurement.local_cluster import LocalCluster


def _status(*args):
  return subprocess.run([sys.executable, "-m", "tfplace.cli.main", "cluster",
                         "status", *args], capture_output=True, text=True,
                        timeout=120)


@pytest.fixture(scope="module")
def addresses():
  with LocalCluster(num_workers=2) as servers:
    yield servers.cluster_spec["worker"]


def test_status_of_a_spec_says_which_task_each_server_serves(addresses):
  out = _status("--cluster_spec", json.dumps({"worker": addresses}),
                "--json")
  assert out.returncode == 0, out.stderr[-2000:]
  rows = json.loads(out.stdout.strip().splitlines()[-1])["workers"]
  assert [r["serves"] for r in rows] == [
      "/job:worker/task:0", "/job:worker/task:1"]


def test_status_of_a_swapped_spec_exits_2_naming_the_task_served(addresses):
  # It said both workers were reachable and exited 0: only reachability
  # was checked, not which task answers.
  swapped = addresses[::-1]
  out = _status("--cluster_spec", json.dumps({"worker": swapped}))
  assert out.returncode == 2, out.stderr[-2000:]
  assert out.stdout.splitlines() == [
      f"task 0 {swapped[0]}, reachable, serves /job:worker/task:1",
      f"task 1 {swapped[1]}, reachable, serves /job:worker/task:0"]
  errors = [l for l in out.stderr.splitlines() if "error:" in l]
  assert errors == [
      f"tfplace cluster: error: the cluster spec lists {swapped[0]} as "
      "/job:worker/task:0, but the server there is /job:worker/task:1 of its "
      "own cluster; give the spec the servers were started with (each "
      "task's address, in task order); 1 more address(es) not the task "
      "listed either"]
