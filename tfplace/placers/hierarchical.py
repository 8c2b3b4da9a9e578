"""The hierarchical planner: a learned grouper and a seq2seq placer."""

import dataclasses

from tfplace.placers import learned_common as common
from tfplace.placers.registry import register_placer


@dataclasses.dataclass(frozen=True)
class HierarchicalOptions(common.LearnedOptions):
  num_groups: int = 0


HierarchicalOptions.__doc__ = (
    "Options of the hierarchical placer.\n\n  Attributes:" +
    common.COMMON_ATTRIBUTES +
    "\n    num_groups: groups the grouper forms; 0: min(256, 20 x devices) as"
    "\n      in the paper.\n  ")


@register_placer("hierarchical")
class HierarchicalPlacer(common.LearnedPlacer):
  """The hierarchical planner's learned placer.

  Paper: Mirhoseini, Goldie, Pham, Steiner, Le, Dean, "A Hierarchical Model
  for Device Placement", ICLR 2018. A feed-forward grouper gives every
  colocation group (never split) a softmax over N groups, and a seq2seq
  placer gives every group a device; both are trained jointly by the policy
  gradient of the simulated step time (`tfplace.rl.networks.
  hierarchical_network`), with REINFORCE (or PPO) on tf-agents.
  """

  Options = HierarchicalOptions

  def setup(self, problem, start, env_config):
    from tfplace.rl.builders import hierarchical_setup
    return hierarchical_setup(problem, start.group_devices, start.step_time_s,
                              env_config)
