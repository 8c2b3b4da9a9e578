"""The `tfplace` command: `tfplace VERB [--flags]`.

Each verb lives in its own module `tfplace/cli/<verb>_cmd.py`, which defines
its absl flags at import and a `main(argv)` function. Only the chosen verb's
module is imported, so verbs never see each other's flags. Any `TfplaceError`
(bad input) prints one message and exits with status 2; so do flag errors.
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


def _fail(verb: str, message: str) -> None:
  sys.stderr.write(f"tfplace {verb}: error: {message}\n")
  sys.exit(2)


def main(argv: Optional[List[str]] = None) -> None:
  """Dispatches `tfplace VERB ...` to the verb's module."""
  argv = list(sys.argv if argv is None else argv)
  if len(argv) < 2 or argv[1] in ("-h", "--help", "help"):
    sys.stdout.write(USAGE)
    sys.exit(0 if len(argv) >= 2 else 2)
  verb = argv[1]
  if verb not in VERBS:
    sys.stderr.write(f"tfplace: unknown verb {verb!r}\n\n{USAGE}")
    sys.exit(2)
  import tfplace  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TF loads)
  from absl import app, flags
  from tfplace.errors import TfplaceError
  module = importlib.import_module(VERBS[verb][0])
  rest = argv[2:]
  if any(a in ("-h", "--help", "--helpfull") for a in rest):
    doc = (module.__doc__ or "").strip()
    extra = getattr(module, "extra_help", None)
    sys.stdout.write(f"tfplace {verb}: {doc}\n\nflags:\n"
                     f"{flags.FLAGS.module_help(module)}\n"
                     + (f"\n{extra()}\n" if extra else ""))
    sys.exit(0)

  def parse(args):
    try:
      return flags.FLAGS(args)
    except flags.Error as e:
      _fail(verb, f"{e} (see tfplace {verb} --help)")

  def run_verb(args):
    try:
      return module.main(args)
    except TfplaceError as e:
      _fail(verb, str(e))

  app.run(run_verb, argv=[f"tfplace {verb}"] + rest, flags_parser=parse)


def run_main() -> None:
  """Console-script entry point."""
  main(sys.argv)


if __name__ == "__main__":
  run_main()
