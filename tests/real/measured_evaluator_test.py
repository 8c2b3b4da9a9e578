"""Measured step times as a search's evaluator, and the fine-tune on them:
in process on logical CPUs (a GPU that is not there fails), and on TF
servers whose worker dies."""

import dataclasses

import numpy as np
import pytest

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.cost.cluster import Device, make_cluster
from tfplace.cost.presets import cpu_cluster
from tfplace.measurement.config import MeasureConfig
from tfplace.models.registry import build_model
from tfplace.placers.problem import PlacementProblem
from tfplace.placers.search_support import StopSearch, group_devices
from tfplace.real.fine_tune import RealRewardSettings, fine_tune
from tfplace.real.measured_evaluator import MeasuredEvaluator, MeasuredSettings
from tfplace.real.target import Target, resolve_target

FAST = MeasuredSettings(measure=MeasureConfig(warmup=1, steps=2))
# Counts measurements exactly: no confirmation of faster placements.
UNCONFIRMED = dataclasses.replace(FAST, confirm_rounds=0)


@pytest.fixture(scope="module")
def graph():
  return build_model("mlp_towers", num_towers=2, hidden=16, batch_size=8,
                     input_size=16, num_layers=1)


def _cpus_and_a_gpu():
  """Two in-process CPUs and a GPU this machine does not have."""
  cpus = cpu_cluster(2)
  gpu = dataclasses.replace(cpus.devices[0], type="GPU",
                            name="/job:localhost/replica:0/task:0/device:GPU:0")
  return make_cluster("cpu2_gpu", list(cpus.devices) + [gpu],
                      default_link=cpus.default_link)


def test_failures_are_a_penalty_and_placements_are_measured_once(graph):
  problem = PlacementProblem.build(graph, _cpus_and_a_gpu())
  g = problem.groups.num_groups
  reference = np.zeros(g, np.int32)
  evaluator = MeasuredEvaluator(problem, Target(""), reference, UNCONFIRMED)
  assert evaluator.reference_s > 0
  split = (np.arange(g) % 2).astype(np.int32)
  on_gpu = np.full(g, 2, np.int32)
  times = evaluator(np.stack([split, on_gpu, split, reference]))
  assert np.isfinite(times).all() and times[0] > 0 and times[2] == times[0]
  assert times[1] == pytest.approx(2.0 * evaluator.reference_s)  # penalty
  assert times[3] == evaluator.reference_s
  assert [i for i, _ in evaluator.stats.failed] == [1]
  # 1 reference + 2 around the batch + 2 new placements.
  assert evaluator.stats.measured == 5
  again = evaluator(np.stack([on_gpu, split]))
  assert np.array_equal(again, times[[1, 0]])
  assert evaluator.stats.measured == 5
  assert evaluator.stats.remembered == 2 + 2


def test_a_faster_placement_is_confirmed_against_the_incumbent(graph):
  problem = PlacementProblem.build(graph, cpu_cluster(2))
  g = problem.groups.num_groups
  reference = np.zeros(g, np.int32)
  evaluator = MeasuredEvaluator(problem, Target(""), reference, FAST)
  lucky, real, slow = (np.ones(g, np.int32), (np.arange(g) % 2).astype(
      np.int32), (1 - np.arange(g) % 2).astype(np.int32))
  # Scripted step times by placement, in seconds: the first figure of each,
  # then every fresh one (the reference always 1.0).
  first = {lucky.tobytes(): 0.5, real.tobytes(): 0.8, slow.tobytes(): 1.2}
  fresh = {lucky.tobytes(): 1.1, real.tobytes(): 0.9,
           reference.tobytes(): 1.0}
  seen = set()

  def scripted(placement, index, cache=True):
    key = group_devices(problem, placement).tobytes()
    evaluator.stats.measured += 1
    if key in first and key not in seen:
      seen.add(key)
      return first[key]
    return fresh[key]

  evaluator._median = scripted
  evaluator.reference_s, evaluator.stats.measured = 1.0, 0
  times = evaluator(np.stack([lucky, real, slow]))
  # lucky (0.5 first) loses its pairs to the reference: 1.1; real (0.8)
  # is then confirmed against the reference (still the incumbent): 0.9.
  assert times == pytest.approx([1.1, 0.9, 1.2])
  assert evaluator.stats.confirmed == 2 and evaluator.stats.rejected == 1
  # 2 references + 3 new + 2 pairs of 2.
  assert evaluator.stats.measured == 2 + 3 + 8


@pytest.mark.parametrize("algorithm", ["local_search", "cross_entropy"])
def test_a_fine_tune_returns_the_start_unless_a_fresh_duel_confirms(
    graph, algorithm):
  cluster = cpu_cluster(2)
  problem = PlacementProblem.build(graph, cluster)
  start = tfplace.place(graph, cluster, "round_robin")
  settings = RealRewardSettings(budget_s=3, batch_size=2, blocks=4,
                                duel_rounds=1, measured=FAST, progress=False,
                                algorithm=algorithm)
  result = fine_tune(problem, start, resolve_target("local"), settings, seed=0)
  assert result.search["evaluations"] >= 2 and result.measured >= 3
  assert result.improved == (result.duel_ratio is not None
                             and result.duel_ratio < 1.0)
  if not result.improved:
    assert result.placement.devices == start.devices
  summary = result.placement.metadata.extra["real_reward"]
  assert summary["improved"] == result.improved
  assert summary["search"]["algorithm"] == algorithm
  # A 3 s budget, the duel included; slack for a slow machine, far under
  # the default budget (300 s).
  assert result.seconds < 30


def test_a_dead_worker_stops_the_search(graph):
  with tfplace.LocalCluster(num_workers=2) as servers:
    problem = PlacementProblem.build(graph, servers.to_cluster())
    g = problem.groups.num_groups
    settings = dataclasses.replace(FAST, measure=MeasureConfig(
        warmup=1, steps=2, step_timeout_s=5))
    evaluator = MeasuredEvaluator(problem, resolve_target(servers),
                                  np.zeros(g, np.int32), settings)
    servers.processes[1].kill()
    servers.processes[1].wait()
    with pytest.raises(StopSearch, match="worker task 1"):
      evaluator((np.arange(g) % 2).astype(np.int32)[None, :])


def test_ctrl_c_ends_the_fine_tune_with_the_start_and_no_duel(graph,
                                                              monkeypatch):
  import os
  import signal
  from tfplace import interrupts
  from tfplace.real import measured_evaluator
  cluster = cpu_cluster(2)
  problem = PlacementProblem.build(graph, cluster)
  start = tfplace.place(graph, cluster, "round_robin")
  calls, real_call = [], measured_evaluator.MeasuredEvaluator.__call__

  def call_then_ctrl_c(self, candidates):
    calls.append(1)
    if len(calls) == 3:
      os.kill(os.getpid(), signal.SIGINT)
    return real_call(self, candidates)

  monkeypatch.setattr(measured_evaluator.MeasuredEvaluator, "__call__",
                      call_then_ctrl_c)
  settings = RealRewardSettings(budget_s=60, batch_size=2, blocks=4,
                                measured=FAST, progress=False)
  try:
    result = fine_tune(problem, start, resolve_target("local"), settings, 0)
  finally:
    interrupts.clear()
  assert result.search["interrupted"] and len(calls) == 3
  assert result.seconds < 30 and result.duel_ratio is None
  assert not result.improved and result.placement.devices == start.devices
