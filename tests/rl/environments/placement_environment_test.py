"""The one-shot environment talks through specs and TimeStep."""

import tfplace  # noqa: F401  (before TensorFlow)

import numpy as np
from tf_agents.environments import utils as env_utils
from tf_agents.trajectories import time_step as ts

from tfplace.rl.builders import group_memory
from tfplace.rl.environments.codecs import UnitCodec
from tfplace.rl.environments.evaluator import PlacementEvaluator
from tfplace.rl.environments.placement_environment import PlacementEnvironment
from tfplace.rl.environments.rewards import RewardConfig


def make_env(problem, batch_size=3):
  memory = group_memory(problem)
  codec = UnitCodec(np.arange(problem.groups.num_groups), memory.allowed)
  evaluator = PlacementEvaluator(problem.simulate_groups, memory)
  return PlacementEnvironment(codec, evaluator, reference_s=2.0,
                              batch_size=batch_size,
                              reward=RewardConfig("relative"))


def test_one_step_episodes_with_simulated_rewards(two_groups):
  env = make_env(two_groups)
  first = env.reset()
  assert first.step_type.tolist() == [ts.StepType.FIRST] * 3
  assert first.observation["allowed"].shape == (3, 2, 2)
  last = env.step(np.array([[1, 1], [0, 1], [0, 0]], np.int32))
  assert last.step_type.tolist() == [ts.StepType.LAST] * 3
  # Step times 2 s, 10 s, 20 s against the 2 s reference.
  np.testing.assert_allclose(env.last_step_times, [2.0, 10.0, 20.0])
  np.testing.assert_allclose(last.reward, [0.0, -4.0, -9.0])
  assert last.discount.tolist() == [0.0] * 3
  assert env.evaluator.num_evaluations == 3


def test_masked_devices_are_in_the_observation(chains):
  env = make_env(chains, batch_size=1)
  allowed = env.reset().observation["allowed"][0]
  # Op 2 (its own group, id 1 after op 1 joined op 0) has no kernel on 1.
  assert allowed[1].tolist() == [True, False, True]
  assert allowed.sum() == allowed.size - 1


def test_validates_with_tf_agents_random_policy(chains):
  env = make_env(chains, batch_size=2)
  env_utils.validate_py_environment(env, episodes=2)
