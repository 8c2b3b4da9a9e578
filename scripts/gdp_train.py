"""GDP's batch training: one policy trained on several graphs at once.

Trains one `gdp` policy on every graph of --graphs together (benchmark model
names or graph files; `GDPPlacer.train_on_graphs`, `tfplace.rl.
batch_training`) for --budget_s seconds in all, on one cluster. Each graph
starts from its best heuristic and ends with the best placement found for
it; --logdir gets, per graph, its placement (best_placement.json and the
placed GraphDef), checkpoint and TensorBoard curves under graphs/NAME/, and
the shared network under network/, so that a search on a graph it never saw
can start from it:

  python scripts/gdp_train.py --graphs rnnlm,inception_v3,transformer \\
      --cluster k80x4 --budget_s 900 --logdir out/gdp_zoo
  tfplace place nmt.meta --cluster k80x4 --placer gdp --budget_s 300 \\
      --placer_options pretrained=out/gdp_zoo --out p.json

--resume continues a stopped training (the same graphs); Ctrl-C stops it
with every graph's best placement so far. Prints one line per graph (start
and best step time) and, last, a JSON line with the same figures.
"""

import json
import os
import re
import sys

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.cli.app_runner import run_app, start_script

start_script("gdp_train")  # Ctrl-C, TF's start-up lines: from here.

from absl import flags  # noqa: E402

from tfplace.errors import PlacementError  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_list("graphs", None, "benchmark model names or graph files "
                  "(GraphDef, MetaGraphDef, SavedModel), two or more")
flags.DEFINE_string("cluster", "k80x4", "a preset name, a cluster JSON file "
                    "or a `tfplace cluster up` state file (one for all)")
flags.DEFINE_string("calibration", None, "a `tfplace calibrate` file: "
                    "calibrated costs and links")
flags.DEFINE_float("budget_s", 600.0, "wall-time budget of the whole "
                   "training, in seconds")
flags.DEFINE_string("logdir", "out/gdp_train", "where placements, "
                    "checkpoints, curves and the network go")
flags.DEFINE_bool("resume", False, "continue the training in --logdir")
flags.DEFINE_integer("seed", 0, "random seed")
flags.DEFINE_string("placer_options", "", "more gdp options, k=v,... "
                    "(agent, num_chunks, hidden, pretrained, ...)")
flags.mark_flag_as_required("graphs")


def graph_name(source: str) -> str:
  """A graph's name in --logdir: the model name, or the file's name without
  its extension ('.' and other characters as '_')."""
  if os.path.exists(source):
    source = os.path.splitext(os.path.basename(source.rstrip("/")))[0]
  return re.sub(r"[^A-Za-z0-9_-]", "_", source) or "graph"


def main(argv):
  del argv
  from tfplace.cli.run_helpers import (cluster_and_cost_model,
                                       load_graph_or_model)
  from tfplace.placers.options import parse_option_text
  from tfplace.placers.problem import PlacementProblem
  from tfplace.placers.registry import get_placer
  names = [graph_name(source) for source in FLAGS.graphs]
  if len(set(names)) < len(names):
    raise PlacementError(f"--graphs gives two graphs one name ({names}): "
                         f"rename a file")
  cluster, cost_model = cluster_and_cost_model(FLAGS.cluster, None,
                                               FLAGS.calibration)
  problems = {name: PlacementProblem.build(load_graph_or_model(source),
                                           cluster, cost_model)
              for name, source in zip(names, FLAGS.graphs)}
  placer = get_placer("gdp", {
      **parse_option_text(FLAGS.placer_options), "budget_s": FLAGS.budget_s,
      "logdir": FLAGS.logdir, "resume": FLAGS.resume})
  placements = placer.train_on_graphs(problems, seed=FLAGS.seed)
  rows = {}
  for name, placement in placements.items():
    search = placement.metadata.extra["search"]
    rows[name] = {k: search[k] for k in (
        "start", "start_step_time_s", "step_time_s", "samples",
        "stopped_by")}
    where = os.path.join(FLAGS.logdir, "graphs", name, "best_placement.json")
    print(f"{name}: {search['start_step_time_s']:.6g} s ({search['start']})"
          f" -> {search['step_time_s']:.6g} s, {search['samples']} samples; "
          f"{where}")
  print(f"network: {os.path.join(FLAGS.logdir, 'network')} (a gdp search's "
        f"pretrained={FLAGS.logdir})")
  print(json.dumps({"graphs": rows, "logdir": FLAGS.logdir}))
  return 0


if __name__ == "__main__":
  run_app(main, sys.argv, "gdp_train")
