"""The layout shows the pipeline: no module imports from a later stage.

Stages, in pipeline order (WORKSPACE_NOTES.md, "Architecture"):

    graph → cost → placement → simulator → grouping → placers (+ rl)
      → pipeline → measurement → real → trace → apply → experiments → cli

`errors`, `io_utils`, `device_names`, `interrupts` and `units` are base modules
anyone may import; `models` (benchmark graph builders) imports only `graph`.
Imports inside functions count too: a lazy import is still a dependency.
"""

import ast
import os

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "tfplace")
STAGES = ["graph", "cost", "placement", "simulator", "grouping",
          "placers", "pipeline", "measurement", "real", "trace", "apply",
          "experiments", "cli"]
SAME_STAGE = {"rl": "placers"}
BASE = {"errors", "io_utils", "device_names", "interrupts", "units"}
EXEMPT = {"__init__", "__main__"}  # The lazy public API and `python -m`.


def _stage(top: str) -> str:
  return SAME_STAGE.get(top, top)


def _modules():
  for dirpath, _, files in os.walk(ROOT):
    for name in files:
      if name.endswith(".py"):
        path = os.path.join(dirpath, name)
        rel = os.path.relpath(path, ROOT)[:-3].split(os.sep)
        yield rel, path


def _imported_tops(path: str):
  """(line, top-level tfplace package or module) of every tfplace import."""
  with open(path) as f:
    tree = ast.parse(f.read())
  for node in ast.walk(tree):
    names = []
    if isinstance(node, ast.ImportFrom) and node.module:
      if node.module == "tfplace":
        names = [alias.name for alias in node.names]
      elif node.module.startswith("tfplace."):
        names = [node.module.split(".")[1]]
    elif isinstance(node, ast.Import):
      names = [a.name.split(".")[1] for a in node.names
               if a.name.startswith("tfplace.")]
    for name in names:
      yield node.lineno, name


def test_every_top_level_package_has_a_stage():
  tops = {rel[0] for rel, _ in _modules()}
  known = set(STAGES) | set(SAME_STAGE) | BASE | EXEMPT | {"models"}
  assert tops <= known, f"add {sorted(tops - known)} to the layering test"


@pytest.mark.parametrize("rel, path", sorted(_modules()),
                         ids=lambda x: "/".join(x) if isinstance(x, list)
                         else "")
def test_no_import_from_a_later_stage(rel, path):
  top = rel[0]
  if top in EXEMPT or top in BASE:
    allowed = BASE if top in BASE else None
  elif top == "models":
    allowed = BASE | {"graph", "models"}
  else:
    stage = STAGES.index(_stage(top))
    allowed = BASE | set(STAGES[:stage + 1]) | {
        k for k, v in SAME_STAGE.items() if STAGES.index(v) <= stage}
    if _stage(top) in ("experiments", "cli"):
      allowed.add("models")
  if allowed is None:
    return
  bad = [(line, name) for line, name in _imported_tops(path)
         if name not in allowed and name != "__version__"]
  assert not bad, (f"tfplace/{'/'.join(rel)}.py imports from a later stage: "
                   + ", ".join(f"line {line}: tfplace.{name}"
                               for line, name in bad))
