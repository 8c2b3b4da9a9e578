"""Batches of one-step episodes as the [B, T] trajectories agents train on.

Each placement is an episode of one step: FIRST -> LAST. tf-agents' PPO
needs at least two time steps per trajectory (the last transition of a
sequence has no advantage), so every episode is written as two transitions:
the placement (FIRST -> LAST, reward r) and the boundary that follows it
(LAST -> FIRST, reward 0), which both agents mask out.
"""

import numpy as np
import tensorflow as tf
from tf_agents.trajectories import time_step as ts
from tf_agents.trajectories import trajectory


def num_action_dims(action_spec) -> int:
  """Total number of scalar actions in a (nested) action spec."""
  return int(sum(np.prod(s.shape) for s in tf.nest.flatten(action_spec)))


def _pair(first, second):
  return tf.nest.map_structure(
      lambda a, b: tf.convert_to_tensor(np.stack([a, b], axis=1)), first,
      second)


def one_step_episodes(time_step: ts.TimeStep, action_step,
                      next_time_step: ts.TimeStep) -> trajectory.Trajectory:
  """[B, 2] trajectory from a batch of FIRST steps, actions and LAST steps."""
  b = len(time_step.step_type)
  first = np.full(b, ts.StepType.FIRST, dtype=np.int32)
  last = np.full(b, ts.StepType.LAST, dtype=np.int32)
  return trajectory.Trajectory(
      step_type=_pair(first, last),
      observation=_pair(time_step.observation, next_time_step.observation),
      action=_pair(action_step.action, action_step.action),
      policy_info=_pair(action_step.info, action_step.info),
      next_step_type=_pair(last, first),
      reward=_pair(next_time_step.reward, np.zeros(b, np.float32)),
      discount=_pair(next_time_step.discount, np.ones(b, np.float32)))


def with_replayed(time_step: ts.TimeStep, action_step, next_time_step:
                  ts.TimeStep, action, reward: float, copies: int):
  """The batch with `copies` more episodes: `action` with `reward`.

  The replayed episodes share the first episode's observations and policy
  info (every episode of a placement batch starts from the same
  observation). Returns (time_step, action_step, next_time_step).
  """
  if copies < 1:
    return time_step, action_step, next_time_step

  def grow(batch, extra):
    return tf.nest.map_structure(
        lambda a, e: np.concatenate([a, np.repeat(np.asarray(e)[None],
                                                  copies, axis=0)]),
        batch, extra)

  first = tf.nest.map_structure(lambda a: a[0], (time_step, next_time_step,
                                                 action_step.info))
  replay_next = first[1]._replace(reward=np.float32(reward))
  return (grow(time_step, first[0]),
          action_step._replace(action=grow(action_step.action, action),
                               info=grow(action_step.info, first[2])),
          grow(next_time_step, replay_next))
