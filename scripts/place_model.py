"""The main job: place a benchmark model on a preset cluster with every placer.

Builds the training step, runs each one-pass placer, then each search placer
(--searches, --budget_s seconds each, started from the best one-pass
placement), simulates each placement, prints a table against the lower bound
(fastest first) and the searches' figures, and writes to --out_dir:
  best_placement.json   the fastest feasible placement (tfplace JSON format)
  placed_graph.pb       the graph with NodeDef.device set to that placement
  comparison.json       every placer's simulated step time and wall time

  python scripts/place_model.py                      # inception_v3 on k80x4
  python scripts/place_model.py --model nmt --cluster k80x2 --placers m_etf,m_sct
  python scripts/place_model.py --searches local_search --budget_s 120
  python scripts/place_model.py --searches=            # one-pass placers only
"""

import json
import os
import sys

import tfplace  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow)
from tfplace.cli.app_runner import run_app, start_script

start_script("place_model")  # Ctrl-C, TF's start-up lines: from here.

from absl import flags, logging

from tfplace.cost.presets import load_cluster
from tfplace.errors import TfplaceError
from tfplace.experiments.compare_placers import (BASELINE_PLACERS,
                                                  SEARCH_PLACERS,
                                                  compare_with_searches,
                                                  require_best)
from tfplace.graph.graph_io import write_graph_file
from tfplace.io_utils import atomic_write
from tfplace.models.registry import build_model, list_models

FLAGS = flags.FLAGS
flags.DEFINE_string("model", "inception_v3",
                    "benchmark model (tfplace.models.registry.list_models())")
flags.DEFINE_string("cluster", "k80x4", "cluster preset name or JSON path")
flags.DEFINE_list("placers", list(BASELINE_PLACERS),
                  "placer names (default: every one-pass baseline)")
flags.DEFINE_list("searches", list(SEARCH_PLACERS),
                  "search (or learned: colocrl, hierarchical, placeto, gdp, "
                  "mars) placers, started from the best of --placers")
flags.DEFINE_float("budget_s", 60.0, "seconds each search may take")
flags.DEFINE_string("out_dir", "out", "where to write the results")


def run(model: str, cluster_name: str, placers, out_dir: str,
        searches=(), budget_s: float = 60.0) -> None:
  if model not in list_models():
    raise TfplaceError(f"unknown model {model!r}; choose from {list_models()}")
  if os.path.exists(out_dir) and not os.path.isdir(out_dir):
    raise TfplaceError(f"--out_dir {out_dir} is a file: give a folder for "
                       "best_placement.json, placed_graph.pb and "
                       "comparison.json")
  cluster = load_cluster(cluster_name)
  placers = list(placers) or list(BASELINE_PLACERS)
  logging.info("building %s", model)
  graph = build_model(model)
  print(f"{model}: {graph.num_ops} ops, {graph.num_colocation_groups} "
        f"colocation groups; cluster {cluster.name}: "
        f"{', '.join(cluster.device_names)}")
  comparison = compare_with_searches(graph, cluster, placers, searches,
                                     budget_s)
  print(comparison.to_markdown())
  if searches:
    print(comparison.search_markdown())
  best = require_best(comparison)
  os.makedirs(out_dir, exist_ok=True)
  best.placement.save(os.path.join(out_dir, "best_placement.json"))
  write_graph_file(os.path.join(out_dir, "placed_graph.pb"),
                   best.placement.to_graph_def(graph))
  atomic_write(os.path.join(out_dir, "comparison.json"),
               json.dumps(comparison.to_dict(), indent=1))
  print(f"best: {best.placer}, {best.step_time_s * 1e3:.4g} ms per step "
        f"(lower bound {comparison.lower_bound_s * 1e3:.4g} ms); wrote "
        f"{out_dir}/best_placement.json and {out_dir}/placed_graph.pb")


def main(argv):
  del argv
  run(FLAGS.model, FLAGS.cluster, FLAGS.placers, FLAGS.out_dir,
      FLAGS.searches, FLAGS.budget_s)


if __name__ == "__main__":
  run_app(main, sys.argv, "place_model")
