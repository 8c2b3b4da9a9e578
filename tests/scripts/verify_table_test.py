"""scripts/verify_table.py: bad input is refused before any cluster starts."""

import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts",
                      "verify_table.py")


def test_an_unknown_graph_exits_2_before_any_work(tmp_path):
  run = subprocess.run([sys.executable, SCRIPT, "--graphs", "towers2,nope"],
                       cwd=tmp_path, capture_output=True, text=True,
                       timeout=120)
  assert run.returncode == 2, run.stderr[-2000:]
  assert "unknown graphs ['nope']" in run.stderr
  assert "Traceback" not in run.stderr and "done" not in run.stdout
