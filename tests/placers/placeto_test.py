"""The placeto placer: registry, options, trivial cases, a short search."""

import tfplace  # noqa: F401  (before TensorFlow)

import json
import os

import pytest
import search_testlib as lib

from tfplace.errors import PlacementError
from tfplace.pipeline import run_placer
from tfplace.placers.base import PlacerKind
from tfplace.placers.registry import get_placer, list_placers


def test_registered_as_learned_with_options():
  assert "placeto" in list_placers(PlacerKind.LEARNED)
  placer = get_placer("placeto", "agent=ppo,reward_mode=final,rounds=3")
  assert placer.options.agent == "ppo" and placer.options.rounds == 3
  assert placer.options.reward_mode == "final"
  default = get_placer("placeto").agent_config()
  assert (default.baseline, default.lr) == ("per_step", 3e-2)
  assert get_placer("placeto", "agent=ppo").agent_config().lr == 1e-2
  assert get_placer("placeto", "lr=0.5").agent_config().lr == 0.5
  with pytest.raises(PlacementError, match="reward_mode must be one of"):
    get_placer("placeto", "reward_mode=sometimes")
  with pytest.raises(PlacementError, match="penalty only"):
    get_placer("placeto", "memory_rule=repair")
  assert "Addanki" in type(placer).__doc__


def test_one_device_or_one_group_returns_at_once():
  placement = get_placer("placeto").place(lib.chain_problem(num_devices=1))
  assert len(set(placement.devices.values())) == 1
  one_group = lib.chain_problem(num_ops=1)
  assert len(get_placer("placeto").place(one_group).devices) == 1


def test_short_search_returns_a_feasible_placement_no_slower_than_start(
    tmp_path):
  problem = lib.chain_problem()
  logdir = str(tmp_path / "placeto")
  placer = get_placer("placeto", {
      "agent": "reinforce", "budget_s": 600, "max_samples": 48,
      "batch_size": 8, "hidden": 8, "logdir": logdir, "progress": False})
  run = run_placer(problem, placer, seed=0)
  search = run.placement.metadata.extra["search"]
  assert run.feasible
  assert run.step_time_s <= search["start_step_time_s"] + 1e-12
  assert search["samples"] >= 48 and search["stopped_by"] == "max_samples"
  saved = json.loads(open(os.path.join(logdir, "best_placement.json")).read())
  assert saved["metadata"]["predicted_step_time_s"] == pytest.approx(
      run.step_time_s)
