"""Runs a program of apply_children.py in a fresh process: its result."""

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def run_child(name: str, timeout_s: float = 300) -> dict:
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep +
             os.environ.get("PYTHONPATH", ""))
  proc = subprocess.run(
      [sys.executable, os.path.join(HERE, "apply_children.py"), name],
      capture_output=True, text=True, cwd=ROOT, env=env, timeout=timeout_s)
  lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
  assert proc.returncode == 0 and lines, proc.stderr[-3000:]
  return json.loads(lines[-1][len("RESULT "):])


def check_training(result: dict, devices) -> None:
  """Same losses, >= 99 % of the placement's ops on their device, variables
  where placed, both devices used."""
  assert len(result["losses"]) == 3
  # Same math; unfused MatMul + BiasAdd (remapping off) may round the last
  # bit differently.
  assert result["placed_losses"] == pytest.approx(result["losses"], rel=1e-5)
  assert result["compared"] >= 0.5 * result["named_ops"]
  assert result["matched"] >= 0.99 * result["compared"], result["mismatches"]
  placed = {name: device for name, device in result["variables_placed"].items()
            if device is not None}
  assert len(placed) >= len(result["variables"]) - 1  # fit's step counter
  assert {name: result["variables"][name] for name in placed} == placed
  assert set(placed.values()) == set(devices)
  assert set(result["devices_used"]) >= set(devices)
