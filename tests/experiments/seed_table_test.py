"""Tests of the seed-table experiment on a small model."""

import tfplace  # noqa: F401  (before TensorFlow)

import json
import math

import numpy as np
import pytest

from tfplace.errors import TfplaceError
from tfplace.pipeline import PlacerRun
from tfplace.simulator.result import SimResult
from tfplace.experiments import seed_table


@pytest.fixture(scope="module")
def table():
  config = seed_table.TableConfig(
      models=("mlp_towers",), gpus=(2,), placers=("m_topo", "m_etf"),
      searches=("local_search",), budget_s=1.0,
      overrides={"mlp_towers": {"num_towers": 2}})
  return seed_table.run_seed_table(config, progress=False)


def test_one_row_per_model_and_gpu_count(table):
  assert [(r.model, r.num_gpus, r.cluster) for r in table.rows] == [
      ("mlp_towers", 2, "k80x2")]
  row = table.rows[0]
  assert [c.placer for c in row.cells] == ["m_topo", "m_etf", "local_search"]
  for cell in row.cells:
    assert cell.feasible and cell.error is None
    # No placement beats the lower bound.
    assert cell.step_time_s >= row.lower_bound_s * (1 - 1e-9)
  # The search starts from the row's best one-pass placer, never worse.
  best = min(row.cells[:2], key=lambda c: c.step_time_s)
  search = row.cells[2].placement.metadata.extra["search"]
  assert search["start"] == best.placer
  assert row.cells[2].step_time_s <= best.step_time_s


def test_markdown_and_json(table):
  lines = table.to_markdown().splitlines()
  assert lines[0].split(" | ")[3:8] == ["m-TOPO", "m-ETF", "Local search",
                                        "Learned", "Lower bound"]
  assert lines[2].startswith("| mlp_towers | 2 |")
  data = json.loads(table.to_json())
  assert data["rows"][0]["cells"][1]["placer"] == "m_etf"


def test_oom_and_error_cells_print_as_such():
  infeasible = SimResult(math.inf, False, np.zeros(2), np.zeros(2), 0, (1,))
  oom = PlacerRun("m_etf", None, infeasible, 0.1)
  err = PlacerRun("scotch", None, None, 0.1, error="boom")
  assert (oom.text, err.text) == ("OOM", "error")
  assert math.isinf(err.step_time_s) and not err.feasible


def test_parse_overrides():
  assert seed_table.parse_overrides("nmt", ["hidden=8", "lr=0.5", "x=true"]) == {
      "hidden": 8, "lr": 0.5, "x": True}
  with pytest.raises(TfplaceError):
    seed_table.parse_overrides("nmt", ["hidden"])


def test_unknown_placer_is_rejected():
  with pytest.raises(TfplaceError):
    seed_table.run_seed_table(seed_table.TableConfig(placers=("nope",)),
                              progress=False)


def test_learned_column_shows_the_learned_placer():
  config = seed_table.TableConfig(
      models=("mlp_towers",), gpus=(2,), placers=("m_etf",),
      overrides={"mlp_towers": {"num_towers": 2}}, learned=("colocrl",),
      placer_options={"colocrl": {"max_samples": 32, "hidden": 8}})
  row = seed_table.run_seed_table(config, progress=False).rows[0]
  assert [c.placer for c in row.cells] == ["m_etf"]
  learned = row.learned[0]
  assert learned.placer == "colocrl" and learned.feasible
  # Started, like a search, from the row's best placer.
  assert learned.placement.metadata.extra["search"]["start"] == "m_etf"
  assert learned.step_time_s <= row.cells[0].step_time_s + 1e-12
  assert row.learned_text.endswith("(colocrl)")
