"""The one-shot placement environment: one step places every unit.

A batched tf-agents `PyEnvironment`: each of the `batch_size` parallel
episodes is one placement. `reset` gives FIRST time steps whose observation is
``{"allowed": bool [U, D]}`` (where each unit may go: a kernel for every
member, and parameters that fit the device's memory); `step` decodes the
actions into a device per colocation group, simulates the whole batch with
one `simulate_batch` call (through `PlacementEvaluator`) and returns LAST time
steps with the shaped rewards.

The graph itself does not change between episodes, so its per-group features
(`tfplace.rl.features`) are given to the networks when they are built rather
than sent, B copies at a time, through every observation.
"""

from typing import Optional

import numpy as np
from tf_agents.environments import py_environment
from tf_agents.specs import array_spec
from tf_agents.trajectories import time_step as ts

from tfplace.errors import PlacementError
from tfplace.rl.environments.codecs import ActionCodec
from tfplace.rl.environments.evaluator import PlacementEvaluator
from tfplace.rl.environments.rewards import RewardConfig, rewards


class PlacementEnvironment(py_environment.PyEnvironment):
  """Batched one-shot placement over the simulator.

  After each `step`, `last_step_times`, `last_devices` and `last_rewards`
  hold what was simulated (after the memory rule), for the search's
  best-so-far.
  """

  def __init__(self, codec: ActionCodec, evaluator: PlacementEvaluator,
               reference_s: float, batch_size: int,
               reward: Optional[RewardConfig] = None):
    """Builds the environment.

    Args:
      codec: actions <-> device per colocation group.
      evaluator: simulates batches of placements.
      reference_s: the reference step time of the reward shaping (the start
        placement's).
      batch_size: placements per step (B).
      reward: the reward shaping.
    """
    super().__init__(handle_auto_reset=True)
    if batch_size < 1:
      raise PlacementError(f"batch_size must be >= 1, got {batch_size}")
    self.codec = codec
    self.evaluator = evaluator
    self.reference_s = float(reference_s)
    self.reward_config = reward or RewardConfig()
    self._batch_size = batch_size
    self._allowed = np.broadcast_to(codec.allowed,
                                    (batch_size,) + codec.allowed.shape)
    self._action_spec = codec.action_spec()
    self._observation_spec = {"allowed": array_spec.ArraySpec(
        codec.allowed.shape, np.bool_, name="allowed")}
    self.last_step_times = np.zeros(0)
    self.last_rewards = np.zeros(0, dtype=np.float32)
    self.last_devices = np.zeros((0, codec.num_groups), dtype=np.int32)

  @property
  def batched(self) -> bool:
    return True

  @property
  def batch_size(self) -> int:
    return self._batch_size

  def observation_spec(self):
    return self._observation_spec

  def action_spec(self):
    return self._action_spec

  def _observation(self):
    return {"allowed": np.array(self._allowed)}

  def _reset(self) -> ts.TimeStep:
    b = self._batch_size
    return ts.TimeStep(
        step_type=np.full(b, ts.StepType.FIRST, dtype=np.int32),
        reward=np.zeros(b, dtype=np.float32),
        discount=np.ones(b, dtype=np.float32),
        observation=self._observation())

  def _step(self, action) -> ts.TimeStep:
    devices = self.codec.decode(action)
    times, simulated = self.evaluator.evaluate(devices)
    self.last_step_times, self.last_devices = times, simulated
    self.last_rewards = rewards(times, self.reference_s, self.reward_config)
    b = self._batch_size
    return ts.TimeStep(
        step_type=np.full(b, ts.StepType.LAST, dtype=np.int32),
        reward=self.last_rewards,
        discount=np.zeros(b, dtype=np.float32),
        observation=self._observation())
