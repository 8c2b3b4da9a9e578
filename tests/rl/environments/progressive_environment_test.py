"""Placeto's progressive MDP: visits, rewards, simulation, specs."""

import tfplace  # noqa: F401  (before TensorFlow)

import numpy as np
import pytest
from tf_agents.environments import utils as env_utils
from tf_agents.trajectories import time_step as ts

from tfplace.cost.op_costs import OpCosts
from tfplace.cost.presets import cpu_cluster
from tfplace.graph.op_graph import Edge, Op, OpGraph
from tfplace.placers.problem import PlacementProblem
from tfplace.rl.builders import group_memory
from tfplace.rl.environments.codecs import UnitCodec
from tfplace.rl.environments.progressive_environment import (
    ProgressiveEnvironment)
from tfplace.rl.environments.rewards import RewardConfig, rewards
from tfplace.rl.environments.schedule_evaluator import ScheduleEvaluator


def heavy_chains() -> PlacementProblem:
  """Chains a -> b and c -> d on 3 devices of 8 GB; a and c hold 6 GB of
  parameters each, so they never fit on one device."""
  ops = [Op(n, "MatMul", output_bytes=(1000,), param_bytes=p)
         for n, p in (("a", 6e9), ("b", 0), ("c", 6e9), ("d", 0))]
  graph = OpGraph(ops, [Edge(0, 1, 0, 1000), Edge(2, 3, 0, 1000)],
                  graph_def=None, name="heavy")
  costs = OpCosts(np.tile([[1.0], [2.0], [1.0], [3.0]], (1, 3)),
                  graph.param_bytes, graph.output_bytes)
  return PlacementProblem(graph, cpu_cluster(3, memory_bytes=8e9,
                                             bandwidth=1e6), costs)


def make_env(problem, start, batch_size=3, shaping="relative", **kwargs):
  """Every colocation group is its own unit."""
  groups = problem.groups
  codec = UnitCodec(np.arange(groups.num_groups),
                    group_memory(problem).allowed)
  evaluator = ScheduleEvaluator(
      codec, groups.group_of, problem.simulate_groups,
      lambda d: problem.simulator.simulate_batch_start_times(groups.expand(d)))
  start = np.asarray(start, np.int32)
  reference = float(problem.simulate_groups(start[None])[0])
  return ProgressiveEnvironment(evaluator, groups.topo_order(), start,
                                reference, batch_size, RewardConfig(shaping),
                                **kwargs)


def test_an_episode_replaces_each_group_once(two_groups):
  # a and b take 10 s on device 0 and 1 s on device 1; start: both on 0.
  env = make_env(two_groups, [0, 0])
  first = env.reset()
  assert first.step_type.tolist() == [ts.StepType.FIRST] * 3
  obs = first.observation
  assert obs["step"].tolist() == [0, 0, 0]
  np.testing.assert_allclose(obs["start_s"][0], [0.0, 0.5])  # b after a.
  np.testing.assert_allclose(obs["step_time"], 1.0)
  evaluations = env.evaluator.num_evaluations
  mid = env.step(np.array([1, 1, 0]))  # Group a (step 0) moves, or stays.
  assert mid.step_type.tolist() == [ts.StepType.MID] * 3
  np.testing.assert_allclose(mid.reward, [0.5, 0.5, 0.0])  # 20 s -> 10 s.
  # Episodes 0 and 1 reached the same placement: simulated once. Episode 2
  # kept its placement: not evaluated.
  assert env.evaluator.num_evaluations == evaluations + 1
  assert env.placements_evaluated == 2
  np.testing.assert_array_equal(mid.observation["devices"],
                                [[1, 0], [1, 0], [0, 0]])
  np.testing.assert_allclose(mid.observation["start_s"][0], [0.0, 0.0])
  last = env.step(np.array([1, 0, 1]))  # Then group b.
  assert last.step_type.tolist() == [ts.StepType.LAST] * 3
  assert last.discount.tolist() == [0.0] * 3
  np.testing.assert_allclose(last.reward, [0.4, 0.0, 0.5])
  np.testing.assert_allclose(env.last_step_times, [2.0, 10.0, 10.0])
  np.testing.assert_allclose(env.last_rewards, [0.9, 0.5, 0.5])
  np.testing.assert_array_equal(env.last_devices, [[1, 1], [1, 0], [0, 1]])
  assert env.unsimulated_finals == 1  # Episode 1 kept b where it was.
  assert env.evaluator.num_evaluations == evaluations + 3
  env.reset()
  env.step(np.array([1, 0, 1]))  # [1, 0] again: from the memo.
  assert env.evaluator.num_evaluations == evaluations + 3
  assert env.evaluator.num_memo_hits >= 2
  assert env.reset().observation["devices"].tolist() == [[0, 0]] * 3


def run_episode(env, rng):
  """Random allowed actions; returns the per-step rewards [T, B]."""
  time_step = env.reset()
  rewards_seen = []
  while not time_step.is_last().all():
    allowed = time_step.observation["allowed"]
    action = np.array([rng.choice(np.flatnonzero(a)) for a in allowed])
    time_step = env.step(action)
    rewards_seen.append(time_step.reward)
  return np.array(rewards_seen)


@pytest.mark.parametrize("shaping", ["relative", "neg_sqrt"])
def test_intermediate_rewards_sum_to_the_final_improvement(shaping):
  problem = heavy_chains()
  start = np.array([0, 0, 2, 2], np.int32)
  rng = np.random.default_rng(0)
  env = make_env(problem, start, batch_size=8, shaping=shaping)
  infeasible = 0
  for _ in range(3):
    per_step = run_episode(env, rng)
    final = rewards(env.last_step_times, env.reference_s, env.reward_config)
    start_value = rewards(np.array([env.reference_s]), env.reference_s,
                          env.reward_config)
    np.testing.assert_allclose(per_step.sum(axis=0), final - start_value,
                               atol=1e-5)
    assert np.any(per_step[:-1] != 0)
    infeasible += int(np.sum(~np.isfinite(env.last_step_times)))
  assert infeasible > 0  # The penalty was exercised.
  final_env = make_env(problem, start, batch_size=8, shaping=shaping,
                       reward_mode="final")
  per_step = run_episode(final_env, np.random.default_rng(0))
  assert not per_step[:-1].any()
  np.testing.assert_allclose(per_step[-1], final_env.last_rewards)


def test_final_rewards_without_schedule_simulate_final_placements_only(
    chains):
  start = np.zeros(chains.groups.num_groups, np.int32)
  env = make_env(chains, start, batch_size=4, reward_mode="final",
                 schedule_features=False)
  before = env.evaluator.num_evaluations
  env.reset()
  for step in range(env.num_steps):
    moved = np.array([2, 0, 0, 0]) if step == 3 else np.zeros(4, np.int32)
    time_step = env.step(moved)
    if step < env.num_steps - 1:
      assert env.evaluator.num_evaluations == before
  assert time_step.observation["start_s"].max() == 0.0
  assert env.evaluator.num_evaluations == before + 1  # Only the changed one.
  assert env.unsimulated_finals == 3


def test_masked_device_is_the_observation_of_its_step(chains):
  env = make_env(chains, np.zeros(chains.groups.num_groups, np.int32), 1)
  time_step, masks = env.reset(), {}
  for step in range(env.num_steps):
    masks[int(env.order[step])] = time_step.observation["allowed"][0].tolist()
    time_step = env.step(np.zeros(1, np.int32))
  assert masks[1] == [True, False, True]  # Op 2 has no kernel on device 1.
  assert all(m == [True] * 3 for g, m in masks.items() if g != 1)


def test_validates_with_tf_agents_random_policy(chains):
  env = make_env(chains, np.zeros(chains.groups.num_groups, np.int32), 2)
  env_utils.validate_py_environment(env, episodes=2)
