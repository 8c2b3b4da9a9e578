"""Placeto: a graph-embedding policy that improves a placement group by
group."""

import dataclasses

from tfplace.errors import PlacementError
from tfplace.placers import learned_common as common
from tfplace.placers.registry import register_placer

REWARD_MODES = ("intermediate", "final")


@dataclasses.dataclass(frozen=True)
class PlacetoOptions(common.LearnedOptions):
  baseline: str = "per_step"
  batch_size: int = 16
  memory_rule: str = "penalty"
  replay_best: int = 0
  reexplore_after: int = 0
  hidden: int = 32
  reward_mode: str = "intermediate"
  schedule_features: bool = True
  rounds: int = 2
  num_chunks: int = 64

  def __post_init__(self):
    super().__post_init__()
    if self.reward_mode not in REWARD_MODES:
      raise PlacementError(f"option reward_mode must be one of "
                           f"{list(REWARD_MODES)}, got {self.reward_mode!r}")
    if self.memory_rule != "penalty":
      raise PlacementError("placeto supports memory_rule=penalty only (a "
                           "repair would move groups the episode has not "
                           "visited)")
    if self.replay_best:
      raise PlacementError("placeto replays no incumbent (replay_best=0): an "
                           "episode is a sequence of states to simulate, not "
                           "one action")
    if self.reexplore_after:
      raise PlacementError("placeto does not re-explore (reexplore_after=0): "
                           "its policy has no per-unit target to refit")
    if self.rounds < 0 or self.num_chunks < 1 or self.hidden < 1:
      raise PlacementError("rounds must be >= 0, num_chunks and hidden >= 1")


PlacetoOptions.__doc__ = (
    "Options of the Placeto placer.\n\n  Attributes:" + common.COMMON_ATTRIBUTES
    + "\n      (placeto: the graph embedding's and the policy head's width;"
    "\n      lr none: 3e-2 for reinforce, 1e-2 for ppo; memory_rule"
    "\n      penalty, replay_best 0 and reexplore_after 0 only; bias_scale"
    "\n      unused.)"
    "\n    reward_mode: \"intermediate\" (each step is rewarded with the"
    "\n      improvement it made; the rewards of an episode sum to the final"
    "\n      improvement) or \"final\" (only the final placement's reward)."
    "\n    schedule_features: give the network each group's start time in the"
    "\n      simulated schedule (simulates every step of an episode)."
    "\n    rounds: message-passing rounds of the graph embedding."
    "\n    num_chunks: topological chunks of colocation groups; each chunk is"
    "\n      split by the start placement's devices into the groups an"
    "\n      episode visits.\n  ")


@register_placer("placeto")
class PlacetoPlacer(common.LearnedPlacer):
  """Placeto's progressive placer.

  Paper: Addanki, Bojja Venkatakrishnan, Gupta, Mao, Alizadeh, "Placeto:
  Learning Generalizable Device Placement Algorithms for Distributed Machine
  Learning", NeurIPS 2019. An episode starts from the start placement and
  visits every group once in topological order; at each step the policy
  re-places the visited group given the current placement
  (`tfplace.rl.environments.progressive_environment`). The policy embeds
  the group graph by message passing in both directions and pools separate
  summaries of the current group's ancestors, descendants and parallel
  peers (`tfplace.rl.networks.placeto_network`); it is trained on the
  simulator with REINFORCE (per-step baseline) or PPO on tf-agents, through
  the search loop every learned placer shares
  (`tfplace.rl.progressive_search`).
  """

  Options = PlacetoOptions
  REINFORCE_LR = 3e-2  # The graph network learns far too slowly at 3e-3.
  PPO_LR = 1e-2

  def agent_config(self):
    default = self.PPO_LR if self.options.agent == "ppo" else self.REINFORCE_LR
    return dataclasses.replace(common.agent_config(self.options),
                               lr=self.options.lr or default)

  def setup(self, problem, start, env_config):
    from tfplace.rl.placeto_builder import ProgressiveConfig, placeto_setup
    options = self.options
    config = ProgressiveConfig(
        batch_size=options.batch_size, reward=env_config.reward,
        reward_mode=options.reward_mode,
        schedule_features=options.schedule_features,
        num_chunks=options.num_chunks, hidden=options.hidden,
        rounds=options.rounds)
    return placeto_setup(problem, start.group_devices, start.step_time_s,
                         config)
