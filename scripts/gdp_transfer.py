"""GDP's transfer to unseen graphs: zero-shot and fine-tuned, against fresh.

Per seed: a `gdp` search from fresh weights on every graph of --pairs; GDP's
batch training (one policy on several graphs at once, for --budget_s times
their number) on every source that is a set, A+B+C; then for each
SOURCE:TARGET pair the source's trained policy on the target before any
training (zero-shot: mode, best and median of --samples samples) and a
search on the target started from the source's weights, with the same budget
as the fresh one (`tfplace.experiments.gdp_transfer`). Prints one row per
pair and seed and the medians over seeds; writes table.md and table.json
(atomically) to --out_dir, the searches' logdirs (TensorBoard curves, saved
networks) under --out_dir/logs/.

  python scripts/gdp_transfer.py --pairs rnnlm:nmt,nmt:rnnlm --seeds 0,1 \\
      --budget_s 90
  python scripts/gdp_transfer.py --seeds 0,1 --budget_s 90 \\
      --pairs rnnlm+transformer+resnet_like+random_dag:nmt
"""

import dataclasses
import json
import os
import sys

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.cli.app_runner import run_app, start_script

start_script("gdp_transfer")  # Ctrl-C, TF's start-up lines: from here.

from absl import flags  # noqa: E402

from tfplace.errors import PlacementError  # noqa: E402
from tfplace.io_utils import atomic_write  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_list("pairs", ["rnnlm:nmt", "nmt:rnnlm"],
                  "SOURCE:TARGET benchmark models; a SOURCE A+B+C is batch "
                  "training on those models")
flags.DEFINE_string("cluster", "k80x4", "cluster preset (one for all graphs)")
flags.DEFINE_list("seeds", ["0", "1"], "seeds")
flags.DEFINE_float("budget_s", 90.0, "wall-time budget of each search")
flags.DEFINE_integer("samples", 256, "zero-shot samples per policy")
flags.DEFINE_string("placer_options", "", "more gdp options, k=v,...")
flags.DEFINE_string("out_dir", "out/gdp_transfer", "where tables and logs go")


def _pairs():
  from tfplace.experiments.gdp_transfer import source_graphs
  pairs = []
  for text in FLAGS.pairs:
    source, sep, target = text.partition(":")
    graphs = source_graphs(source)
    if (not sep or not target or not all(graphs) or target in graphs
        or len(set(graphs)) < len(graphs)):
      raise PlacementError(
          f"--pairs takes SOURCE:TARGET, the source a model or a set A+B of "
          f"different models, the target another model; got {text!r}")
    pairs.append((source, target))
  return pairs


def main(argv):
  del argv
  from tfplace.cost.presets import load_cluster
  from tfplace.experiments import gdp_transfer
  from tfplace.models.registry import build_model
  from tfplace.placers.options import parse_option_text
  from tfplace.placers.problem import PlacementProblem
  pairs = _pairs()
  cluster = load_cluster(FLAGS.cluster)
  problems = {name: PlacementProblem.build(build_model(name), cluster)
              for name in sorted({n for source, target in pairs
                                  for n in (*gdp_transfer.source_graphs(source),
                                            target)})}
  options = {"budget_s": FLAGS.budget_s,
             **parse_option_text(FLAGS.placer_options)}
  rows = gdp_transfer.transfer_table(
      problems, pairs, [int(s) for s in FLAGS.seeds], options, FLAGS.out_dir,
      FLAGS.samples, report=lambda row: print(
          gdp_transfer.markdown([row])[2], flush=True))
  lines = gdp_transfer.markdown(rows)
  print("\n".join(lines))
  atomic_write(os.path.join(FLAGS.out_dir, "table.md"), "\n".join(lines) + "\n")
  atomic_write(os.path.join(FLAGS.out_dir, "table.json"), json.dumps(
      [dataclasses.asdict(r) for r in rows], indent=1))
  return 0


if __name__ == "__main__":
  run_app(main, sys.argv, "gdp_transfer")
