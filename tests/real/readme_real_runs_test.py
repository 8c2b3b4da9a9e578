"""The README's "Check the winners on real runs" Python snippet runs."""

import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SECTION = "## Check the winners on real runs"


def _section() -> str:
  text = open(os.path.join(ROOT, "README.md")).read()
  start = text.index(SECTION)
  return text[start:text.index("\n## ", start + len(SECTION))]


def test_the_python_snippet_runs():
  code = re.findall(r"```python\n(.*?)```", _section(), flags=re.S)
  assert len(code) == 1
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep +
             os.environ.get("PYTHONPATH", ""))
  run = subprocess.run([sys.executable, "-c", code[0]], capture_output=True,
                       text=True, cwd=ROOT, env=env, timeout=300)
  assert run.returncode == 0, run.stderr[-3000:]
  assert "speed-up over the best heuristic" in run.stdout
  assert run.stdout.strip().splitlines()[-1] in ("True", "False")


def test_the_commands_use_flags_that_exist():
  commands = re.findall(r"```bash\n(.*?)```", _section(), flags=re.S)[0]
  help_text = subprocess.run(
      [sys.executable, "-m", "tfplace.cli.main", "place", "--help"],
      capture_output=True, text=True, cwd=ROOT, timeout=120).stdout
  place = commands.split("tfplace place")[1].split("tfplace cluster")[0]
  assert "--verify_top_k" in place and "--real_reward" in place
  for flag in re.findall(r"--(\w+)", place):
    assert f"--{flag}:" in help_text or f"--[no]{flag}:" in help_text, flag
