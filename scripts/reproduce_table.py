"""Reproduces the seed paper's running-time table on the simulator.

Rows: model x #GPUs (K80 presets "k80x2", "k80x4"); columns: single CPU,
single GPU, Scotch, METIS, expert, m-TOPO, m-ETF, m-SCT, the search placers
(local search, cross-entropy, CP-SAT: --budget_s seconds each, started from
the row's best one-pass placement), the Learned column, the lower bound, and
every placer's running time.

  python scripts/reproduce_table.py --out_dir /tmp/table
  python scripts/reproduce_table.py --quick --models rnnlm --gpus 2
  python scripts/reproduce_table.py --override nmt.hidden=512
  python scripts/reproduce_table.py --searches= # the one-pass placers only
  python scripts/reproduce_table.py --learned colocrl --learned_budget_s 300

The Learned column shows the fastest of the --learned placers (empty without
them); each starts, like the searches, from the row's best one-pass placement
and searches for --learned_budget_s seconds per row.

Prints the Markdown table and writes table.md and table.json (atomically) to
--out_dir.
"""

import os
import sys

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.cli.app_runner import run_app, start_script

start_script("reproduce_table")  # Ctrl-C, TF's start-up lines: from here.


from absl import flags

from tfplace.errors import TfplaceError
from tfplace.experiments import seed_table
from tfplace.io_utils import atomic_write

FLAGS = flags.FLAGS
flags.DEFINE_list("models", list(seed_table.DEFAULT_MODELS), "Models to place.")
flags.DEFINE_list("gpus", [str(g) for g in seed_table.DEFAULT_GPUS],
                  "GPU counts (cluster presets k80x<N>).")
flags.DEFINE_list("placers", list(seed_table.DEFAULT_PLACERS),
                  "Placer names (see `tfplace place --help`).")
flags.DEFINE_list("searches", ["local_search", "cross_entropy", "cp_sat"],
                  "Search placers (columns after --placers).")
flags.DEFINE_float("budget_s", seed_table.DEFAULT_SEARCH_BUDGET_S,
                   "Seconds each search may take per row.")
flags.DEFINE_bool("quick", False, "Use reduced model sizes.")
flags.DEFINE_multi_string("override", [],
                          "Model config override, MODEL.FIELD=VALUE.")
flags.DEFINE_string("out_dir", None, "Where to write table.md and table.json.")
flags.DEFINE_bool("progress", True, "Show a progress bar.")
flags.DEFINE_list("learned", [], "Learned placers for the Learned column "
                  "(colocrl, hierarchical).")
flags.DEFINE_float("learned_budget_s", seed_table.DEFAULT_LEARNED_BUDGET_S,
                   "Wall-time budget of each learned search.")
flags.DEFINE_string("learned_options", "",
                    "More options of the learned placers, key=value,...")


def _config() -> seed_table.TableConfig:
  try:
    gpus = tuple(int(g) for g in FLAGS.gpus)
  except ValueError:
    raise TfplaceError(f"--gpus must be integers, got {FLAGS.gpus}") from None
  overrides = {m: dict(seed_table.QUICK_OVERRIDES.get(m, {}))
               if FLAGS.quick else {} for m in FLAGS.models}
  for item in FLAGS.override:
    model, sep, rest = item.partition(".")
    if not sep or model not in overrides:
      raise TfplaceError(f"bad --override {item!r}: use MODEL.FIELD=VALUE "
                         f"with MODEL in {FLAGS.models}")
    overrides[model].update(seed_table.parse_overrides(model, [rest]))
  from tfplace.placers.options import parse_option_text
  learned_options = parse_option_text(FLAGS.learned_options)
  return seed_table.TableConfig(
      models=tuple(FLAGS.models), gpus=gpus, placers=tuple(FLAGS.placers),
      searches=tuple(FLAGS.searches), budget_s=FLAGS.budget_s,
      overrides=overrides, learned=tuple(FLAGS.learned),
      learned_budget_s=FLAGS.learned_budget_s,
      placer_options={name: learned_options for name in FLAGS.learned})


def main(argv):
  del argv
  table = seed_table.run_seed_table(_config(), progress=FLAGS.progress)
  markdown = table.to_markdown()
  print(markdown)
  if FLAGS.out_dir:
    atomic_write(os.path.join(FLAGS.out_dir, "table.md"), markdown)
    atomic_write(os.path.join(FLAGS.out_dir, "table.json"), table.to_json())
  return 0


if __name__ == "__main__":
  run_app(main, sys.argv, "reproduce_table")
