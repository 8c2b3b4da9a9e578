"""Assembles Placeto's search: units, graph view, environment, networks.

`placeto_setup` takes a placement problem and a start placement and returns
the `LearnedSetup` the shared search loop runs with `ProgressiveSearchLoop`.
The groups an episode visits are ColocRL's units (`tfplace.grouping.chunks`:
topological chunks of colocation groups split by the start placement's
devices), so that an episode is a few hundred steps on graphs with thousands
of colocation groups, and so that Placeto and ColocRL place the same units
when compared; with `num_chunks` >= the number of colocation groups every
colocation group is its own unit.
"""

import dataclasses
from typing import Dict, Optional

import numpy as np
from tf_agents.specs import tensor_spec

from tfplace.errors import PlacementError
from tfplace.rl.builders import chunk_units, group_memory, signature
from tfplace.rl.environments.codecs import UnitCodec
from tfplace.rl.environments.progressive_environment import (
    ProgressiveEnvironment, RewardMode)
from tfplace.rl.environments.rewards import RewardConfig
from tfplace.rl.environments.schedule_evaluator import ScheduleEvaluator
from tfplace.rl.progressive_graph import build_progressive_graph
from tfplace.rl.progressive_search import ProgressiveSearchLoop
from tfplace.rl.search import LearnedSetup


@dataclasses.dataclass(frozen=True)
class ProgressiveConfig:
  """Placeto's environment and network sizes.

  Attributes:
    batch_size: episodes run in lock step (one simulator call per step).
    reward: the reward shaping.
    reward_mode: "intermediate" or "final" (`RewardMode`).
    schedule_features: give the network each group's start time in the
      simulated schedule (simulates every step).
    num_chunks: topological chunks of colocation groups, each split by the
      start placement's devices into the units an episode visits.
    hidden: embedding and head width.
    rounds: message-passing rounds.
  """
  batch_size: int = 16
  reward: RewardConfig = RewardConfig()
  reward_mode: str = RewardMode.INTERMEDIATE.value
  schedule_features: bool = True
  num_chunks: int = 64
  hidden: int = 32
  rounds: int = 2

  def __post_init__(self):
    valid = [m.value for m in RewardMode]
    if self.reward_mode not in valid:
      raise PlacementError(f"unknown reward mode {self.reward_mode!r}; "
                           f"choose one of {valid}")
    if self.num_chunks < 1 or self.hidden < 1 or self.rounds < 0:
      raise PlacementError("num_chunks and hidden must be >= 1, rounds >= 0")


def _evaluator(problem, codec: UnitCodec) -> ScheduleEvaluator:
  groups, simulator = problem.groups, problem.simulator
  return ScheduleEvaluator(
      codec, groups.group_of, problem.simulate_groups,
      lambda devices: simulator.simulate_batch_start_times(
          groups.expand(devices)))


def placeto_setup(problem, start_devices: np.ndarray, start_step_time_s: float,
                  config: ProgressiveConfig = ProgressiveConfig(),
                  extra_signature: Optional[Dict[str, object]] = None
                  ) -> LearnedSetup:
  """Placeto's `LearnedSetup` (see the module docstring).

  Args:
    problem: the placement problem.
    start_devices: int [G], the start placement (feasible).
    start_step_time_s: its simulated step time.
    config: environment and network sizes.
    extra_signature: more entries for the checkpoint signature.
  """
  from tfplace.rl.networks.placeto_network import (PlacetoNetwork,
                                                   PlacetoValueNetwork)
  unit_graph, unit_of = chunk_units(problem, start_devices, config.num_chunks)
  codec = UnitCodec(unit_of, group_memory(problem).allowed)
  view = build_progressive_graph(problem.graph, unit_graph, start_step_time_s)
  env = ProgressiveEnvironment(
      _evaluator(problem, codec), view.order, codec.encode(start_devices),
      start_step_time_s, config.batch_size, config.reward,
      config.reward_mode, config.schedule_features)
  obs_spec = tensor_spec.from_spec(env.observation_spec())
  action_spec = tensor_spec.from_spec(env.action_spec())
  return LearnedSetup(
      env=env,
      actor_net=PlacetoNetwork(obs_spec, action_spec, view, config.hidden,
                               config.rounds),
      value_net=PlacetoValueNetwork(obs_spec, view, config.hidden),
      start_devices=np.asarray(start_devices, np.int32),
      start_step_time_s=float(start_step_time_s),
      signature=signature(
          problem, "placeto", extra_signature, units=int(env.num_steps),
          reward_mode=config.reward_mode,
          schedule_features=config.schedule_features, hidden=config.hidden,
          rounds=config.rounds),
      loop_class=ProgressiveSearchLoop)
