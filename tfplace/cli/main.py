"""The `tfplace` command: `tfplace VERB [--flags]`.

Each verb lives in its own module `tfplace/cli/<verb>_cmd.py`, which defines
its absl flags at import and a `main(argv)` function. Only the chosen verb's
module is imported, so verbs never see each other's flags. Any `TfplaceError`
(bad input) prints one message and exits with status 2; so do flag errors.
Ctrl-C ends any verb with one line and status 130, having written nothing
after the interrupt; TensorFlow's C++ start-up lines are filtered from stderr
unless `-v 0` or higher (`tfplace.cli.app_runner`).
"""

import importlib
import sys
from typing import List, Optional

VERBS = {
    "import": ("tfplace.cli.import_cmd", "import a model or graph file -> graph file + summary"),
    "info": ("tfplace.cli.info_cmd", "ops, colocation groups, bytes, FLOPs, op types of a graph"),
    "apply": ("tfplace.cli.apply_cmd", "write a placed GraphDef from a graph and a placement"),
    "clusters": ("tfplace.cli.clusters_cmd", "list cluster presets, or show one as JSON"),
    "place": ("tfplace.cli.place_cmd", "place a graph on a cluster with a placer"),
    "simulate": ("tfplace.cli.simulate_cmd", "predicted step time of a placement"),
    "measure": ("tfplace.cli.measure_cmd", "time real training steps of a placement"),
    "calibrate": ("tfplace.cli.calibrate_cmd", "fit the simulator to a real cluster -> calibration JSON"),
    "cluster": ("tfplace.cli.cluster_cmd", "start/stop a local TensorFlow server cluster"),
    "trace": ("tfplace.cli.trace_cmd", "inspect, export, plot or compare profiler traces"),
}

USAGE = "usage: tfplace VERB [--flags]   (tfplace VERB --help for a verb's flags)\n\nverbs:\n" + "".join(
    f"  {verb:<10} {text}\n" for verb, (_, text) in VERBS.items())


def main(argv: Optional[List[str]] = None) -> None:
  """Dispatches `tfplace VERB ...` to the verb's module."""
  argv = list(sys.argv if argv is None else argv)
  if len(argv) < 2 or argv[1] in ("-h", "--help", "help"):
    sys.stdout.write(USAGE)
    sys.exit(0 if len(argv) >= 2 else 2)
  verb = argv[1]
  from tfplace import interrupts
  interrupts.install(f"tfplace {verb}")  # Ctrl-C while importing, too.
  if verb not in VERBS:
    sys.stderr.write(f"tfplace: unknown verb {verb!r}\n\n{USAGE}")
    sys.exit(2)
  rest = argv[2:]
  if any(a in ("-h", "--help", "--helpfull") for a in rest):
    _help(verb)
  from tfplace.cli.app_runner import run_app
  module = importlib.import_module(VERBS[verb][0])
  run_app(module.main, [f"tfplace {verb}"] + rest, f"tfplace {verb}",
          positional=True)


def _help(verb: str) -> None:
  """Prints the verb's doc, its flags and its extra help; exits 0."""
  import tfplace  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TF loads)
  from absl import flags
  module = importlib.import_module(VERBS[verb][0])
  doc = (module.__doc__ or "").strip()
  extra = getattr(module, "extra_help", None)
  sys.stdout.write(f"tfplace {verb}: {doc}\n\nflags:\n"
                   f"{flags.FLAGS.module_help(module)}\n"
                   + (f"\n{extra()}\n" if extra else ""))
  sys.exit(0)


def run_main() -> None:
  """Console-script entry point."""
  main(sys.argv)


if __name__ == "__main__":
  run_main()
