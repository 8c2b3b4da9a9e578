"""ColocRL: an attentional seq2seq policy trained on the simulator."""

import dataclasses

from tfplace.placers import learned_common as common
from tfplace.placers.registry import register_placer


@dataclasses.dataclass(frozen=True)
class ColocRLOptions(common.LearnedOptions):
  num_chunks: int = 64


ColocRLOptions.__doc__ = (
    "Options of the ColocRL placer.\n\n  Attributes:" + common.COMMON_ATTRIBUTES
    + "\n    num_chunks: topological chunks of colocation groups; each chunk is"
    "\n      split by the start placement's devices into the units placed.\n  ")


@register_placer("colocrl")
class ColocRLPlacer(common.LearnedPlacer):
  """ColocRL's learned placer.

  Paper: Mirhoseini, Pham, Le, Steiner, Larsen, Zhou, Kumar, Norouzi,
  Bengio, Dean, "Device Placement Optimization with Reinforcement Learning",
  ICML 2017. An LSTM encoder reads the units (coarse groups of colocation
  groups, in topological order: `tfplace.grouping.chunks`) and an attentional LSTM
  decoder gives each a device (`tfplace.rl.networks.seq2seq_placer`); the
  reward comes from the simulated step time, the policy is trained with
  REINFORCE (or PPO) on tf-agents.
  """

  Options = ColocRLOptions

  def setup(self, problem, start, env_config):
    from tfplace.rl.builders import colocrl_setup
    return colocrl_setup(problem, start.group_devices, start.step_time_s, env_config)
