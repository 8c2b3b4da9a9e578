"""The learned placers: registry, options, trivial cases, a short search."""

import tfplace  # noqa: F401  (before TensorFlow)

import json
import os
import signal

import pytest
import search_testlib as lib

from tfplace import interrupts
from tfplace.errors import PlacementError
from tfplace.pipeline import run_placer
from tfplace.placers.base import PlacerKind
from tfplace.placers.registry import get_placer, list_placers


def test_registered_as_learned_with_options():
  assert {"colocrl", "hierarchical", "gdp", "mars"} <= set(
      list_placers(PlacerKind.LEARNED))
  placer = get_placer("colocrl", "agent=ppo,budget_s=5,num_chunks=4")
  assert placer.options.agent == "ppo" and placer.options.num_chunks == 4
  assert get_placer("hierarchical", {"num_groups": 8}).options.num_groups == 8
  with pytest.raises(PlacementError, match="agent must be one of"):
    get_placer("colocrl", "agent=dqn")
  with pytest.raises(PlacementError, match="no option num_groups"):
    get_placer("colocrl", "num_groups=3")
  with pytest.raises(PlacementError, match="resume needs a logdir: give "
                     "--logdir DIR"):
    get_placer("hierarchical", "resume=true")
  assert get_placer("colocrl", "reexplore_after=7").options.reexplore_after == 7
  with pytest.raises(PlacementError, match="reexplore_after must be >= 0"):
    get_placer("colocrl", "reexplore_after=-1")
  with pytest.raises(PlacementError, match="placeto does not re-explore"):
    get_placer("placeto", "reexplore_after=5")
  assert get_placer("gdp", "heads=2,segment_length=16").options.heads == 2
  with pytest.raises(PlacementError, match="gdp: heads, sage_layers must be"):
    get_placer("gdp", "heads=0,sage_layers=0")
  mars = get_placer("mars", "pretrain_steps=0,segment_length=8").options
  assert mars.agent == "ppo" and mars.segment_length == 8
  with pytest.raises(PlacementError, match="mars: gcn_layers must be >= 1; "
                     "pretrain_steps must be >= 0; pretrain_lr must be > 0"):
    get_placer("mars", "gcn_layers=0,pretrain_steps=-1,pretrain_lr=0")


@pytest.mark.parametrize("name", ["colocrl", "hierarchical", "gdp", "mars"])
def test_one_device_or_one_group_returns_at_once(name):
  one_device = lib.chain_problem(num_devices=1)
  placement = get_placer(name).place(one_device)
  assert set(placement.devices.values()) == set(one_device.cluster.device_names)
  one_group = lib.chain_problem(num_ops=1)
  placement = get_placer(name).place(one_group)
  assert len(placement.devices) == 1


def test_nothing_fits_is_a_clear_error():
  # 1,000 B of parameters, 500 B a device.
  problem = lib.chain_problem(memory_bytes=500)
  with pytest.raises(PlacementError, match="does not fit in memory: nothing feasible"):
    get_placer("colocrl", "budget_s=5").place(problem)


@pytest.mark.parametrize("name, agent", [("colocrl", "reinforce"),
                                         ("hierarchical", "ppo"),
                                         ("gdp", "ppo"),
                                         ("mars", "reinforce")])
def test_short_search_returns_a_feasible_placement_no_slower_than_start(
    name, agent, tmp_path):
  problem = lib.chain_problem()
  logdir = str(tmp_path / name)
  placer = get_placer(name, {
      "agent": agent, "budget_s": 600, "max_samples": 64, "batch_size": 32,
      "hidden": 8, "ppo_epochs": 1, "logdir": logdir, "progress": False})
  run = run_placer(problem, placer, seed=0)
  search = run.placement.metadata.extra["search"]
  assert run.feasible
  assert run.step_time_s <= search["start_step_time_s"] + 1e-12
  assert search["samples"] == 64 and search["stopped_by"] == "max_samples"
  saved = json.loads(open(os.path.join(logdir, "best_placement.json")).read())
  assert saved["metadata"]["predicted_step_time_s"] == pytest.approx(
      run.step_time_s)


def test_gdp_saves_its_network_and_starts_another_graph_from_it(tmp_path):
  options = {"budget_s": 600, "max_samples": 32, "hidden": 8, "heads": 2,
             "progress": False}
  first = str(tmp_path / "first")
  run_placer(lib.chain_problem(), get_placer("gdp", {**options,
                                                     "logdir": first}), seed=0)
  assert os.path.exists(os.path.join(first, "network", "sizes.json"))
  other = lib.chain_problem(num_ops=20)  # Another graph, as many devices.
  run = run_placer(other, get_placer("gdp", {**options, "pretrained": first}),
                   seed=0)
  assert run.feasible
  with pytest.raises(PlacementError, match="does not fit this search"):
    run_placer(other, get_placer("gdp", {**options, "hidden": 16,
                                         "pretrained": first}), seed=0)


def test_mars_reports_its_pretraining_and_can_skip_it(tmp_path):
  problem = lib.chain_problem()
  options = {"agent": "reinforce", "max_samples": 32, "batch_size": 32,
             "hidden": 8, "progress": False}
  run = run_placer(problem, get_placer("mars", {
      **options, "pretrain_steps": 20, "pretrain_patience": 20,
      "logdir": str(tmp_path)}), seed=0)
  pretrained = run.placement.metadata.extra["search"]["pretrain"]
  assert pretrained["steps"] == 20 and pretrained["best_loss"] > 0
  assert os.listdir(tmp_path / "pretrain")
  run = run_placer(problem, get_placer("mars", {**options,
                                                "pretrain_steps": 0}), seed=0)
  assert "pretrain" not in run.placement.metadata.extra["search"]


def test_mars_pretraining_counts_against_the_budget():
  # Pre-training ran outside the budget: mars at budget_s 3 ran 13 s.
  problem = lib.chain_problem()
  run = run_placer(problem, get_placer("mars", {
      "agent": "reinforce", "budget_s": 0.01, "batch_size": 32, "hidden": 8,
      "progress": False, "pretrain_steps": 500, "pretrain_patience": 500}),
                   seed=0)
  search = run.placement.metadata.extra["search"]
  pretrained = search["pretrain"]
  assert (pretrained["steps"], pretrained["stopped_by"]) == (1, "time")
  assert search["seconds"] >= pretrained["seconds"]  # Inside the budget.
  assert (search["samples"], search["stopped_by"]) == (0, "time_s")
  assert run.feasible
  with pytest.raises(PlacementError, match="pretrain_share must be in"):
    get_placer("mars", "pretrain_share=0")


def test_mars_resume_without_a_checkpoint_still_pretrains(tmp_path):
  # `resume` on a logdir with no checkpoint (a new one, or a search stopped
  # during pre-training) starts fresh: it pre-trains, as a fresh search does.
  # It skipped pre-training, and the encoder never learned.
  problem = lib.chain_problem()
  options = {"agent": "reinforce", "max_samples": 32, "batch_size": 32,
             "hidden": 8, "progress": False, "pretrain_steps": 20,
             "pretrain_patience": 20, "resume": True,
             "logdir": str(tmp_path / "fresh")}
  run = run_placer(problem, get_placer("mars", options), seed=0)
  assert run.placement.metadata.extra["search"]["pretrain"]["steps"] == 20
  # With its checkpoint, a resumed search restores the encoder instead.
  run = run_placer(problem, get_placer("mars", {**options,
                                                "max_samples": 64}), seed=0)
  assert "pretrain" not in run.placement.metadata.extra["search"]


def test_bad_sample_options_and_a_logdir_that_is_a_file_are_named(tmp_path):
  # "max_samples and batch_size must be >= 1" named neither the bad one nor
  # its value; a logdir that is a file failed with "cannot write
  # .../search.json: File exists".
  with pytest.raises(PlacementError, match="option batch_size must be >= 1, "
                     "got 0"):
    get_placer("colocrl", "batch_size=0")
  with pytest.raises(PlacementError, match="option max_samples must be >= 1, "
                     "got -2"):
    get_placer("mars", "max_samples=-2")
  a_file = tmp_path / "p.json"
  a_file.write_text("{}")
  with pytest.raises(PlacementError, match="logdir .*p.json is a file"):
    get_placer("gdp", {"logdir": str(a_file)})
  assert a_file.read_text() == "{}"


def test_gdp_stopped_by_ctrl_c_returns_its_best_and_saves_its_network(
    tmp_path):
  # Saving the network after a Ctrl-C raised Interrupted: `tfplace place`
  # wrote no placement at all, and the logdir kept weights without the
  # sizes.json that `pretrained=` needs.
  problem = lib.chain_problem()
  simulate = problem.simulate_groups

  def interrupting(devices):
    if len(devices) > 1:  # A batch of the search, not the start.
      os.kill(os.getpid(), signal.SIGINT)
    return simulate(devices)

  problem.simulate_groups = interrupting
  logdir = str(tmp_path / "gdp")
  try:
    run = run_placer(problem, get_placer("gdp", {
        "budget_s": 600, "max_samples": 10_000, "hidden": 8, "heads": 2,
        "init": "m_etf", "logdir": logdir, "progress": False}), seed=0)
    assert interrupts.interrupted()
  finally:
    interrupts.clear()
  search = run.placement.metadata.extra["search"]
  assert search["interrupted"] and run.feasible
  assert os.path.exists(os.path.join(logdir, "network", "sizes.json"))
