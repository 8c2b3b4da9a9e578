"""`tfplace place --placer placeto` with the learned placers' flags."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
GRAPH = os.path.join(ROOT, "testdata", "mlp_2tower.pbtxt")


def place(*args):
  return subprocess.run(
      [sys.executable, "-m", "tfplace.cli.main", "place", GRAPH, "--cluster",
       "k80x2", "--placer", "placeto", "--placer_options",
       "hidden=8,batch_size=4,num_chunks=8,progress=false", *args],
      capture_output=True, text=True, timeout=180)


def test_placeto_search_and_resume(tmp_path):
  out, logdir = tmp_path / "p.json", tmp_path / "search"
  proc = place("--agent", "reinforce", "--budget_s", "600", "--max_samples",
               "16", "--logdir", str(logdir), "--out", str(out), "--json")
  assert proc.returncode == 0, proc.stderr
  result = json.loads(proc.stdout.strip().splitlines()[-1])
  assert result["placer"] == "placeto" and result["feasible"]
  first = json.loads(out.read_text())["metadata"]["search"]
  assert first["samples"] >= 16 and not first["resumed"]
  assert (logdir / "best_placement.json").exists()
  proc = place("--agent", "reinforce", "--budget_s", "600", "--max_samples",
               str(first["samples"] + 16), "--logdir", str(logdir),
               "--resume", "--out", str(out))
  assert proc.returncode == 0, proc.stderr
  second = json.loads(out.read_text())["metadata"]["search"]
  assert second["resumed"] and second["samples"] >= first["samples"] + 16
  assert second["train_steps"] > first["train_steps"]
