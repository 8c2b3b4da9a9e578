"""Placeto's progressive placement MDP as a batched tf-agents `PyEnvironment`.

Addanki et al. (NeurIPS 2019): an episode starts from a complete placement
(here the search's start placement) and visits every group once, in
topological order; the action at step t re-places the visited group given
the current placement. After |G| steps every group has been reconsidered
once and the episode ends. `batch_size` episodes run in lock step, so each
step simulates all of them with one simulator call.

Rewards, `RewardMode`, with v(T) the reward shaping of a step time T
(`rewards.rewards`: 1 - T / T_start, or -sqrt(T)):

  * ``intermediate``: r_t = v(T(P_t+1)) - v(T(P_t)), the improvement the
    step made (the paper's R(P_t) - R(P_t+1) for a cost R = -v). With
    gamma = 1 the rewards of an episode telescope: they sum to
    v(T(P_final)) - v(T(P_0)), the final improvement over the start.
  * ``final``: 0 until the last step, then v(T(P_final)), the reward the
    one-shot placers get for the same placement.

Simulation: a step whose action keeps a group where it was leaves the
placement unchanged; that episode is not evaluated again (its step time and
schedule are known), and a placement evaluated before comes from the
evaluator's memo. With ``final`` rewards and no schedule features only the
final placements are evaluated. Every placement evaluated is reported in
`last_simulated_*` (for the best-so-far).

Observation (unbatched), what the graph network reads besides the constant
`progressive_graph.ProgressiveGraph`:

  * ``devices``: int32 [G], the current placement;
  * ``step``: int32 [], the index in the visit order of the group to place
    (G in the last time step);
  * ``start_s``: float32 [G], each group's start time in the current
    placement's simulated schedule over the start step time (0 without
    schedule features, and where the placement is infeasible);
  * ``step_time``: float32 [], the current step time over the start step
    time (an infeasible placement counts as its penalty step time);
  * ``allowed``: bool [D], where the group to place may go (a kernel for
    every member, parameters that fit).

The memory rule is ``penalty``: a placement that does not fit scores as the
penalty step time of `rewards.RewardConfig`.
"""

import enum
from typing import Optional

import numpy as np
from tf_agents.environments import py_environment
from tf_agents.specs import array_spec
from tf_agents.trajectories import time_step as ts

from tfplace.errors import PlacementError
from tfplace.rl.environments.rewards import (RewardConfig,
                                             penalized_step_times, rewards)
from tfplace.rl.environments.schedule_evaluator import ScheduleEvaluator


class RewardMode(str, enum.Enum):
  """When a progressive episode is rewarded (see the module docstring)."""
  INTERMEDIATE = "intermediate"
  FINAL = "final"


class ProgressiveEnvironment(py_environment.PyEnvironment):
  """Batched progressive placement over the simulator.

  After each step: `last_simulated_devices` [K, G] and
  `last_simulated_times` [K] hold the placements simulated in it (K <=
  batch size). After the last step of an episode: `last_devices`,
  `last_step_times` and `last_rewards` hold each episode's final placement,
  its step time and its one-shot reward v(T), and `unsimulated_finals`
  counts the final placements that needed no new evaluation (unchanged
  since they were last evaluated). `placements_evaluated` counts the
  placements looked up so far (simulated, or found in the evaluator's memo).
  """

  def __init__(self, evaluator: ScheduleEvaluator, order: np.ndarray,
               start_units: np.ndarray, reference_s: float, batch_size: int,
               reward: Optional[RewardConfig] = None,
               reward_mode: str = RewardMode.INTERMEDIATE.value,
               schedule_features: bool = True):
    """Builds the environment.

    Args:
      evaluator: simulates unit placements (and their schedules).
      order: int [U], the units in visit order (topological).
      start_units: int [U], the start placement (device per unit).
      reference_s: the reward shaping's reference step time (the start's).
      batch_size: episodes run in lock step (B).
      reward: the reward shaping.
      reward_mode: a `RewardMode` name.
      schedule_features: simulate every step for the start times.
    """
    super().__init__(handle_auto_reset=True)
    valid = [m.value for m in RewardMode]
    if reward_mode not in valid:
      raise PlacementError(f"unknown reward mode {reward_mode!r}; choose one "
                           f"of {valid}")
    if batch_size < 1:
      raise PlacementError(f"batch_size must be >= 1, got {batch_size}")
    self.evaluator, self.codec = evaluator, evaluator.codec
    self.order = np.asarray(order, np.int32)
    self.reference_s = float(reference_s)
    self.reward_config = reward or RewardConfig()
    self.reward_mode = reward_mode
    self.schedule_features = schedule_features
    self._batch_size = batch_size
    self._start = np.asarray(start_units, np.int32)
    times, _, starts = evaluator.evaluate(self._start[None], schedule_features)
    self._start_time = float(times[0])
    self._start_starts = (starts[0] if starts is not None else
                          np.zeros(len(self._start)))
    self._specs(len(self._start), self.codec.num_devices)
    self.last_step_times = np.zeros(0)
    self.last_rewards = np.zeros(0, np.float32)
    self.last_devices = np.zeros((0, self.codec.num_groups), np.int32)
    self.last_simulated_times = np.zeros(0)
    self.last_simulated_devices = np.zeros((0, self.codec.num_groups),
                                           np.int32)
    self.unsimulated_finals = 0
    self.placements_evaluated = 0

  def _specs(self, num_units: int, num_devices: int) -> None:
    self._action_spec = array_spec.BoundedArraySpec(
        (), np.int32, 0, num_devices - 1, name="device")
    self._observation_spec = {
        "devices": array_spec.BoundedArraySpec(
            (num_units,), np.int32, 0, num_devices - 1, name="devices"),
        "step": array_spec.BoundedArraySpec((), np.int32, 0, num_units,
                                            name="step"),
        "start_s": array_spec.ArraySpec((num_units,), np.float32, "start_s"),
        "step_time": array_spec.ArraySpec((), np.float32, "step_time"),
        "allowed": array_spec.ArraySpec((num_devices,), np.bool_, "allowed"),
    }

  @property
  def batched(self) -> bool:
    return True

  @property
  def batch_size(self) -> int:
    return self._batch_size

  @property
  def num_steps(self) -> int:
    """Steps per episode: the number of units."""
    return len(self.order)

  def observation_spec(self):
    return self._observation_spec

  def action_spec(self):
    return self._action_spec

  def _observation(self):
    b, t = self._batch_size, self._t
    unit = self.order[min(t, self.num_steps - 1)]
    allowed = self.codec.allowed[unit]
    return {
        "devices": self._devices.copy(),
        "step": np.full(b, t, np.int32),
        "start_s": (self._starts / self.reference_s).astype(np.float32),
        "step_time": (penalized_step_times(
            self._times, self.reference_s, self.reward_config.penalty_factor)
                      / self.reference_s).astype(np.float32),
        "allowed": np.broadcast_to(allowed, (b, len(allowed))).copy(),
    }

  def _reset(self) -> ts.TimeStep:
    b = self._batch_size
    self._t = 0
    self._devices = np.tile(self._start, (b, 1))
    self._times = np.full(b, self._start_time)
    self._starts = np.tile(self._start_starts, (b, 1))
    self._value = rewards(self._times, self.reference_s, self.reward_config)
    self._dirty = np.zeros(b, bool)
    return ts.TimeStep(
        step_type=np.full(b, ts.StepType.FIRST, np.int32),
        reward=np.zeros(b, np.float32), discount=np.ones(b, np.float32),
        observation=self._observation())

  def _step(self, action) -> ts.TimeStep:
    b = self._batch_size
    unit = self.order[self._t]
    action = np.asarray(action, np.int32).reshape(b)
    self._dirty |= action != self._devices[:, unit]
    self._devices[:, unit] = action
    self._t += 1
    last = self._t == self.num_steps
    intermediate = self.reward_mode == RewardMode.INTERMEDIATE.value
    if last:
      self.unsimulated_finals = int(b - self._dirty.sum())
    if intermediate or self.schedule_features or last:
      self._simulate_dirty()
    reward = np.zeros(b, np.float32)
    if intermediate:
      value = rewards(self._times, self.reference_s, self.reward_config)
      reward = (value - self._value).astype(np.float32)
      self._value = value
    elif last:
      reward = rewards(self._times, self.reference_s, self.reward_config)
    if last:
      self._finish()
    return ts.TimeStep(
        step_type=np.full(b, ts.StepType.LAST if last else ts.StepType.MID,
                          np.int32),
        reward=reward, discount=np.full(b, 0.0 if last else 1.0, np.float32),
        observation=self._observation())

  def _simulate_dirty(self) -> None:
    """Simulates the episodes whose placement changed since last time."""
    rows = np.flatnonzero(self._dirty)
    if not len(rows):
      self.last_simulated_times = np.zeros(0)
      self.last_simulated_devices = self.last_simulated_devices[:0]
      return
    times, devices, starts = self.evaluator.evaluate(
        self._devices[rows], self.schedule_features)
    self.placements_evaluated += len(rows)
    self._times[rows] = times
    if starts is not None:
      self._starts[rows] = np.where(np.isfinite(times)[:, None], starts, 0.0)
    self._dirty[rows] = False
    self.last_simulated_times, self.last_simulated_devices = times, devices

  def _finish(self) -> None:
    self.last_step_times = self._times.copy()
    self.last_devices = self.codec.decode(self._devices)
    self.last_rewards = rewards(self._times, self.reference_s,
                                self.reward_config)
