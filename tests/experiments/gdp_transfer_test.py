"""GDP's transfer experiment on two small synthetic graphs."""

import tfplace  # noqa: F401  (before TensorFlow)

import math
import os

from tfplace.cost.presets import load_cluster
from tfplace.experiments import gdp_transfer
from tfplace.models import synthetic
from tfplace.placers.problem import PlacementProblem


OPTIONS = {"budget_s": 600, "max_samples": 32, "hidden": 8, "heads": 2,
           "num_chunks": 8}


def _problems():
  """Three small synthetic graphs on k80x2."""
  cluster = load_cluster("k80x2")
  graphs = {"towers": synthetic.towers(num_towers=2, layers=2),
            "wide": synthetic.layered_dag(num_ops=40, width=8),
            "dag": synthetic.layered_dag(num_ops=60, width=6)}
  return {name: PlacementProblem.build(graph, cluster)
          for name, graph in graphs.items()}


def test_fresh_zero_shot_and_fine_tuned_rows(tmp_path):
  reported = []
  rows = gdp_transfer.transfer_table(
      _problems(), [("towers", "dag")], [0], OPTIONS, str(tmp_path),
      samples=16, report=reported.append)
  assert reported == rows and len(rows) == 1
  row = rows[0]
  assert (row.target, row.source, row.seed) == ("dag", "towers", 0)
  assert row.fine_tuned_samples == row.fresh_samples == 32
  # Both searches start from the best heuristic and never return worse.
  assert row.fine_tuned_s <= row.best_heuristic_s + 1e-12
  assert row.fresh_s <= row.best_heuristic_s + 1e-12
  for shot in (row.zero_shot_pretrained, row.zero_shot_fresh):
    assert math.isfinite(shot.mode_s)
    assert shot.best_s <= shot.median_s
  assert os.path.exists(tmp_path / "logs" / "towers_fresh_s0" / "network" /
                        "sizes.json")
  lines = gdp_transfer.markdown(rows)
  assert lines[2].startswith("| dag | towers | 0 |")
  assert lines[-1].startswith("| dag | towers | 1 |")


def test_a_source_set_is_batch_trained_once_for_its_pairs(tmp_path):
  rows = gdp_transfer.transfer_table(
      _problems(), [("towers+wide", "dag")], [0], OPTIONS, str(tmp_path),
      samples=16, report=lambda row: None)
  assert [(r.target, r.source) for r in rows] == [("dag", "towers+wide")]
  assert rows[0].fine_tuned_samples == 32
  assert rows[0].fine_tuned_s <= rows[0].best_heuristic_s + 1e-12
  logs = tmp_path / "logs"
  batch = logs / "towers+wide_batch_s0"
  assert (batch / "network" / "sizes.json").exists()
  assert sorted(os.listdir(batch / "graphs")) == ["towers", "wide"]
  # Only the target gets a fresh search; the set's graphs are batch-trained.
  assert sorted(p.name for p in logs.iterdir() if "fresh" in p.name) == [
      "dag_fresh_s0"]
