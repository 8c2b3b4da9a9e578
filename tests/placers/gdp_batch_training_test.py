"""GDP's batch training: one policy trained on several graphs at once."""

import tfplace  # noqa: F401  (before TensorFlow)

import json
import logging
import os

import pytest
import search_testlib as lib
import tensorflow as tf

from tfplace.errors import PlacementError
from tfplace.pipeline import evaluate, run_placer
from tfplace.placers.registry import get_placer

OPTIONS = {"budget_s": 600, "max_samples": 64, "batch_size": 32, "hidden": 8,
           "heads": 2, "progress": False}


def _problems():
  return {"short": lib.chain_problem(), "long": lib.chain_problem(num_ops=20)}


def test_one_policy_places_every_graph_and_moves_to_a_new_one(tmp_path):
  logdir = str(tmp_path / "batch")
  placer = get_placer("gdp", {**OPTIONS, "logdir": logdir})
  problems = _problems()
  placements = placer.train_on_graphs(problems, seed=0)
  assert sorted(placements) == ["long", "short"]
  for name, placement in placements.items():
    search = placement.metadata.extra["search"]
    assert search["batch_graphs"] == ["long", "short"]
    assert search["samples"] == 64 and search["stopped_by"] == "max_samples"
    assert search["step_time_s"] <= search["start_step_time_s"] + 1e-12
    result = evaluate(problems[name], placement)
    assert result.feasible
    assert result.step_time_s == pytest.approx(search["step_time_s"])
    saved = json.loads(open(os.path.join(
        logdir, "graphs", name, "best_placement.json")).read())
    assert saved["metadata"]["predicted_step_time_s"] == pytest.approx(
        search["step_time_s"])
  sizes = json.loads(open(os.path.join(logdir, "network",
                                       "sizes.json")).read())
  assert sizes["hidden"] == 8
  # The trained network starts a search on a graph it never saw.
  run = run_placer(lib.chain_problem(num_ops=16), get_placer(
      "gdp", {**OPTIONS, "pretrained": logdir}), seed=0)
  assert run.feasible


def test_resumes_every_graph_and_only_with_the_same_graphs(tmp_path):
  logdir = str(tmp_path / "batch")
  get_placer("gdp", {**OPTIONS, "logdir": logdir}).train_on_graphs(
      _problems(), seed=0)
  resumed = get_placer("gdp", {**OPTIONS, "max_samples": 128, "logdir": logdir,
                               "resume": True}).train_on_graphs(_problems())
  for placement in resumed.values():
    search = placement.metadata.extra["search"]
    assert search["resumed"] and search["samples"] == 128
  others = {"short": lib.chain_problem(),
            "other": lib.chain_problem(num_ops=14)}
  with pytest.raises(PlacementError, match="batch_graphs: checkpoint"):
    get_placer("gdp", {**OPTIONS, "logdir": logdir,
                       "resume": True}).train_on_graphs(others)


def test_resuming_a_finished_training_keeps_its_checkpoints_as_they_were(
    tmp_path, caplog):
  # A resume whose budget was already spent saved every graph again: its
  # own wall time was added to the search's, though it drew nothing. (The
  # optimizer's state was kept: batch training builds the shared optimizer
  # before it restores, unlike a single search.)
  logdir = str(tmp_path / "batch")
  options = {**OPTIONS, "logdir": logdir}
  get_placer("gdp", options).train_on_graphs(_problems(), seed=0)

  def checkpoints():
    out = {}
    for name in ("long", "short"):
      path = tf.train.latest_checkpoint(
          os.path.join(logdir, "graphs", name, "checkpoints"))
      reader = tf.train.load_checkpoint(path)
      out[name] = {key: reader.get_tensor(key).tolist()
                   for key, _ in tf.train.list_variables(path)
                   if "CHECKPOINTABLE" not in key}
    return out

  before = checkpoints()
  assert any("optimizer" in key for key in before["long"])
  with caplog.at_level(logging.WARNING):
    again = get_placer("gdp", {**options, "resume": True}).train_on_graphs(
        _problems(), seed=0)
  assert "budget was already spent (64 of max_samples 64 samples)" in (
      caplog.text)
  assert all(p.metadata.extra["search"]["samples"] == 64
             for p in again.values())
  assert checkpoints() == before


def test_refuses_what_it_cannot_train_on():
  placer = get_placer("gdp", OPTIONS)
  with pytest.raises(PlacementError, match="two or more graphs, got 1"):
    placer.train_on_graphs({"one": lib.chain_problem()})
  with pytest.raises(PlacementError, match="graph names must be"):
    placer.train_on_graphs({"a/b": lib.chain_problem(),
                            "c": lib.chain_problem()})
  with pytest.raises(PlacementError, match="as many devices"):
    placer.train_on_graphs({"three": lib.chain_problem(),
                            "two": lib.chain_problem(num_devices=2)})
  with pytest.raises(PlacementError, match="one: one colocation group"):
    placer.train_on_graphs({"one": lib.chain_problem(num_ops=1),
                            "many": lib.chain_problem()})
