"""GDP: GraphSAGE and segment-level attention, the whole graph in one pass."""

import dataclasses
from typing import Optional

from absl import logging

from tfplace.errors import PlacementError
from tfplace.placers import learned_common as common
from tfplace.placers.registry import register_placer


@dataclasses.dataclass(frozen=True)
class GDPOptions(common.LearnedOptions):
  num_chunks: int = 64
  sage_layers: int = 3
  attention_layers: int = 2
  heads: int = 4
  segment_length: int = 64
  pretrained: Optional[str] = None

  def __post_init__(self):
    super().__post_init__()
    sizes = {k: getattr(self, k) for k in (
        "num_chunks", "sage_layers", "attention_layers", "heads",
        "segment_length", "hidden")}
    bad = {k: v for k, v in sizes.items() if v < 1}
    if bad:
      raise PlacementError(f"gdp: {', '.join(sorted(bad))} must be >= 1, got "
                           f"{bad}")


GDPOptions.__doc__ = (
    "Options of the GDP placer.\n\n  Attributes:" + common.COMMON_ATTRIBUTES
    + "\n    num_chunks: topological chunks of colocation groups; each chunk is"
    "\n      split by the start placement's devices into the units placed"
    "\n      (num_chunks >= the colocation groups: every group a unit)."
    "\n    sage_layers: GraphSAGE layers of the graph embedding."
    "\n    attention_layers: self-attention layers of the placement network."
    "\n    heads: attention heads."
    "\n    segment_length: units per segment (each segment attends to itself"
    "\n      and to the previous segment)."
    "\n    pretrained: the logdir of an earlier gdp search (on any graph, on a"
    "\n      cluster with as many devices): its network's weights, written at"
    "\n      its end to <logdir>/network/, are the start of this one's"
    "\n      (`tfplace.rl.transfer`); none: fresh weights.\n  ")


@register_placer("gdp")
class GDPPlacer(common.LearnedPlacer):
  """GDP's learned placer.

  Paper: Zhou et al., "GDP: Generalized Device Placement for Dataflow
  Graphs", 2019. GraphSAGE embeds the unit graph, a Transformer-XL style
  network (self-attention over segments of the units in topological order,
  each segment also reading the previous one's states) gives every unit a
  device in one pass, and a gate computed from the whole graph's embedding
  scales each attention layer's input (parameter superposition)
  (`tfplace.rl.networks.gdp_network`). Trained on the simulator with
  REINFORCE or PPO on tf-agents through the search loop every learned
  placer shares. The units are ColocRL's (`tfplace.rl.coarse`).

  The weights but a per-unit bias do not depend on the graph: a search with
  a logdir saves them, and `pretrained` starts another graph's search from
  them (GDP's transfer to unseen graphs; `tfplace.rl.transfer`).
  """

  Options = GDPOptions

  def setup(self, problem, start, env_config):
    from tfplace.rl.builders import gdp_setup
    options = self.options
    sizes = {k: getattr(options, k) for k in (
        "sage_layers", "attention_layers", "heads", "segment_length")}
    setup = gdp_setup(problem, start.group_devices, start.step_time_s,
                      env_config, sizes)
    if options.pretrained:
      from tfplace.rl.transfer import load_network
      source = load_network(setup.actor_net, options.pretrained,
                            _transfer_sizes(setup.actor_net))
      logging.info("gdp: network weights from %s", source)
    return setup

  def after_search(self, setup) -> None:
    if self.options.logdir:
      from tfplace.rl.transfer import save_network
      save_network(setup.actor_net, self.options.logdir,
                   _transfer_sizes(setup.actor_net))


def _transfer_sizes(network):
  """What a network must share with a saved one to take its weights."""
  from tfplace.rl.features import SHARED_VOCABULARY
  return {**network.transfer_sizes(), "vocabulary": list(SHARED_VOCABULARY)}
