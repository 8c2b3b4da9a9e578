"""The shared search loop, run on Placeto's progressive episodes.

`ProgressiveSearchLoop` is the `SearchLoop` (`tfplace.rl.search_loop`; the
budget, best-so-far, curves, checkpoints and resume of `tfplace.rl.search`)
with two parts replaced:

  * `step`: one batch of `ProgressiveEnvironment` episodes in lock step. The
    collect policy places one group per call, for every episode at once;
    every placement evaluated along the way is offered to the best-so-far;
    the episodes become one [B, G + 1] trajectory (`progressive_episodes`)
    that the agent trains on. No incumbent is replayed (`replay_best`): an
    episode is a sequence of states, each of which would have to be
    simulated;
  * `start`: warm start "imitation" has no per-unit target here (the start
    placement is the state, not an action); it sets the policy's stay logit
    so that an episode changes about `explore` groups of the start
    placement. "baseline" leaves the policy uniform.

Counting: `evaluations` are the simulator's; `samples` (what the sample
budget counts) are the placements the episodes evaluated (simulated or from
the memo) plus each episode's final placement when it needed no new
evaluation, so a batch counts at least B samples.
"""

from typing import List, Tuple

import numpy as np
import tensorflow as tf
from absl import logging
from tf_agents.trajectories import time_step as ts
from tf_agents.trajectories import trajectory

from tfplace.rl.deferred_compile import PROGRESSIVE_COMPILE_AFTER_STEPS
from tfplace.rl.search_loop import SearchLoop


def _stack(items, transform=lambda x: x):
  return tf.nest.map_structure(
      lambda *xs: tf.convert_to_tensor(np.stack([transform(x) for x in xs],
                                                axis=1)), *items)


def progressive_episodes(time_steps: List[ts.TimeStep],
                         action_steps: List) -> trajectory.Trajectory:
  """[B, T + 1] trajectory of B lock-step episodes of T steps.

  Args:
    time_steps: T + 1 batched time steps, FIRST ... LAST.
    action_steps: the T batched policy steps taken between them.

  Returns:
    The T transitions, then a boundary (LAST -> FIRST, reward 0) that both
    agents mask out and that PPO needs to close the episode.
  """
  last = time_steps[-1]
  b = len(last.step_type)
  first = np.full(b, ts.StepType.FIRST, np.int32)
  actions = [a.action for a in action_steps] + [action_steps[-1].action]
  infos = [a.info for a in action_steps] + [action_steps[-1].info]
  return trajectory.Trajectory(
      step_type=_stack([t.step_type for t in time_steps]),
      observation=_stack([t.observation for t in time_steps]),
      action=_stack(actions), policy_info=_stack(infos),
      next_step_type=_stack([t.step_type for t in time_steps[1:]] + [first]),
      reward=_stack([t.reward for t in time_steps[1:]] +
                    [np.zeros(b, np.float32)]),
      discount=_stack([t.discount for t in time_steps[1:]] +
                      [np.ones(b, np.float32)]))


class ProgressiveSearchLoop(SearchLoop):
  """`SearchLoop` over `ProgressiveEnvironment` (see the module docstring)."""

  compile_after_steps = PROGRESSIVE_COMPILE_AFTER_STEPS

  def __init__(self, setup, agent_config, config):
    super().__init__(setup, agent_config, config)
    self._counted = setup.env.evaluator.num_evaluations  # Not the start's.
    self._looked_up = setup.env.placements_evaluated

  def start(self) -> Tuple[np.ndarray, float]:
    """The restored best, or (fresh) the start placement with the warm
    start applied (see the module docstring)."""
    if self.resumed:
      return super().start()
    setup = self.setup
    devices = np.asarray(setup.start_devices, dtype=np.int32)
    self.keep_best(devices[None], np.array([setup.start_step_time_s]))
    self.stats.start_at(self._reward(setup.start_step_time_s))
    if self.config.warm_start == "imitation":
      units = self.env.num_steps
      keep = float(np.clip(1.0 - self.config.explore / max(units, 1), 0.5,
                           0.999))
      setup.actor_net.set_stay_probability(keep)
      logging.info("warm start: each group stays with probability %.4f",
                   keep)
    return devices, float(setup.start_step_time_s)

  def step(self) -> Tuple[float, float]:
    """One batch of episodes: place, simulate, keep the best, train."""
    env = self.env
    time_step = env.reset()
    time_steps, action_steps = [time_step], []
    for _ in range(env.num_steps):
      action_step = self.policy.action(time_step)
      time_step = env.step(action_step.action)
      if len(env.last_simulated_times):
        self.keep_best(env.last_simulated_devices, env.last_simulated_times)
      time_steps.append(time_step)
      action_steps.append(action_step)
    experience = progressive_episodes(time_steps, action_steps)
    loss = self.train(experience).loss
    self.stats.update(np.sum([t.reward for t in time_steps[1:]], axis=0))
    simulated = env.evaluator.num_evaluations - self._counted
    self._counted = env.evaluator.num_evaluations
    self.state.evaluations.assign_add(simulated)
    looked_up = env.placements_evaluated - self._looked_up
    self._looked_up = env.placements_evaluated
    self.state.samples.assign_add(looked_up + env.unsimulated_finals)
    times = env.last_step_times
    finite = times[np.isfinite(times)]
    return float(loss), float(finite.mean()) if len(finite) else np.inf
