"""The README's "Use the placement in your training code" snippets run.

The first snippet (two logical CPUs, data) is the set-up of the next three
(TF1 Session, TF2 tf.function, Keras fit), which run in one fresh process,
each in its own namespace; the cluster snippet runs alone in another.
"""

import json
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SECTION = "## Use the placement in your training code"
RUNNER = """
import json, sys
blocks = json.loads(sys.stdin.read())
setup = {}
if len(blocks) > 1:
  exec(compile(blocks[0], "README block 0", "exec"), setup)
for k, block in enumerate(blocks[1:] if len(blocks) > 1 else blocks):
  exec(compile(block, f"README block {k + 1}", "exec"), dict(setup))
  print(f"SNIPPET {k + 1} OK", flush=True)
"""


def snippets():
  text = open(os.path.join(ROOT, "README.md")).read()
  start = text.index(SECTION)
  end = text.find("\n## ", start + len(SECTION))
  section = text[start:end if end >= 0 else len(text)]
  return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def _run(blocks):
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep +
             os.environ.get("PYTHONPATH", ""))
  return subprocess.run([sys.executable, "-c", RUNNER],
                        input=json.dumps(blocks),
                        capture_output=True, text=True, cwd=ROOT, env=env,
                        timeout=300)


def test_the_section_has_five_snippets():
  blocks = snippets()
  assert len(blocks) == 5
  assert "tf.compat.v1.Session" in blocks[1]
  assert "factory=True" in blocks[2]
  assert ".fit(" in blocks[3] and "LocalCluster" in blocks[4]


def test_local_snippets_run():
  run = _run(snippets()[:4])
  assert run.returncode == 0, run.stderr[-3000:]
  assert [f"SNIPPET {k} OK" in run.stdout for k in (1, 2, 3)] == [True] * 3
  # The Keras snippet prints the fraction of placed ops on their device.
  lines = run.stdout.splitlines()
  fraction = float(lines[lines.index("SNIPPET 3 OK") - 1])
  assert fraction >= 0.99


def test_cluster_snippet_runs():
  run = _run(snippets()[4:])
  assert run.returncode == 0, run.stderr[-3000:]
  assert "SNIPPET 1 OK" in run.stdout
