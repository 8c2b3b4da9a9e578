"""A learned placer's simulator-trained policy fine-tuned on measured step
times (in process, two logical CPUs): the checkpoint resumed in a copy."""

import os

import pytest

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.cost.presets import cpu_cluster
from tfplace.errors import PlacementError
from tfplace.measurement.config import MeasureConfig
from tfplace.models.registry import build_model
from tfplace.pipeline import run_placer
from tfplace.placers.problem import PlacementProblem
from tfplace.placers.registry import get_placer
from tfplace.real.fine_tune import RealRewardSettings, fine_tune
from tfplace.real.learned_fine_tune import check_learned
from tfplace.real.measured_evaluator import MeasuredSettings
from tfplace.real.target import resolve_target


def _snapshot(directory):
  return {name: os.path.getmtime(os.path.join(directory, name))
          for name in os.listdir(directory)}


def test_the_trained_policy_resumes_on_measured_times_in_a_copy(tmp_path):
  graph = build_model("mlp_towers", num_towers=2, hidden=16, batch_size=8,
                      input_size=16, num_layers=1)
  problem = PlacementProblem.build(graph, cpu_cluster(2))
  logdir = str(tmp_path / "colocrl")
  placer = get_placer("colocrl", {
      "budget_s": 60, "max_samples": 32, "batch_size": 16, "hidden": 8,
      "logdir": logdir, "progress": False})
  trained = run_placer(problem, placer, seed=0).placement
  before = _snapshot(os.path.join(logdir, "checkpoints"))
  settings = RealRewardSettings(
      budget_s=10, batch_size=4, duel_rounds=1, progress=False,
      measured=MeasuredSettings(measure=MeasureConfig(warmup=1, steps=2)))
  result = fine_tune(problem, trained, resolve_target("local"), settings,
                     seed=0, placer=placer)
  search = result.search
  # Time ends it here; a faster machine may draw its 32 samples first.
  assert search["resumed"] and search["stopped_by"] in ("time_s",
                                                        "max_samples")
  assert search["algorithm"] == "colocrl policy"
  assert search["samples"] > 32  # the trained policy's 32, then measured
  assert result.measured >= 3 and result.failed == 0
  assert result.improved == (result.duel_ratio is not None
                             and result.duel_ratio < 1.0)
  # The simulator-trained checkpoint is untouched; the fine-tune has its own.
  assert _snapshot(os.path.join(logdir, "checkpoints")) == before
  assert os.listdir(os.path.join(logdir, "real", "checkpoints"))


def test_learned_placers_that_cannot_be_fine_tuned_are_refused():
  with pytest.raises(PlacementError, match="give it a logdir"):
    check_learned(get_placer("colocrl"))
  with pytest.raises(PlacementError, match="observations need the simulator"):
    check_learned(get_placer("placeto", {"logdir": "x"}))
