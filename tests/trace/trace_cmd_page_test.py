"""`tfplace trace` prints one page: --top limits every list (run as a
subprocess, as a user would)."""

import json
import os
import subprocess
import sys

import pytest

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "testdata", "traces")


def test_top_limits_every_list_and_titles_the_chart(tmp_path):
  pytest.importorskip("matplotlib")
  placement = tmp_path / "p.json"
  placement.write_text(json.dumps({
      "placement": {"mm0": "/job:worker/replica:0/task:0/device:CPU:0",
                    "mm1": "/job:worker/replica:0/task:1/device:CPU:0"},
      "metadata": {"placer": "m_etf"}}))
  png = tmp_path / "g.png"
  proc = subprocess.run(
      [sys.executable, "-m", "tfplace", "trace",
       os.path.join(DATA, "profile_2workers"), "--top", "1", "--gantt",
       str(png), "--placement", str(placement)],
      capture_output=True, text=True, timeout=120)
  assert proc.returncode == 0, proc.stderr
  out = proc.stdout
  assert "127.0.0.1_" not in out  # tasks, not host:port
  assert "... 1 more device\n" in out and "... 1 more device pair\n" in out
  assert "... 2 more places" in out  # critical path: by device, transfers
  assert "top 1 ops by total time" in out
  assert "longest 1 of " in out
  assert len(out.splitlines()) < 35
  assert png.read_bytes()[:4] == b"\x89PNG"


def test_compare_follows_top_and_short_names():
  # --compare listed 20 moved ops by full device name whatever --top said.
  proc = subprocess.run(
      [sys.executable, "-m", "tfplace", "trace",
       os.path.join(DATA, "profile_2workers"), "--top", "1", "--compare",
       os.path.join(DATA, "profile_2cpu")],
      capture_output=True, text=True, timeout=120)
  assert proc.returncode == 0, proc.stderr
  compared = proc.stdout.split("compared with")[1]
  assert "/job:worker" not in compared
  assert "ops on another device: 5\n  add: task:0/CPU:0 -> host:CPU\n  ... and 4 more\n" in compared
