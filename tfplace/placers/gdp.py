"""GDP: GraphSAGE and segment-level attention, the whole graph in one pass."""

import dataclasses
import time
from typing import Dict, Mapping, Optional

from absl import logging

from tfplace.errors import PlacementError
from tfplace.placement import Placement
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
  placer shares. The units are ColocRL's (`tfplace.grouping.chunks`).

  The weights but a per-unit bias do not depend on the graph: a search with
  a logdir saves them, and `pretrained` starts another graph's search from
  them (GDP's transfer to unseen graphs; `tfplace.rl.transfer`).
  `train_on_graphs` trains one policy on several graphs at once (GDP's
  batch training; `tfplace.rl.batch_training`).
  """

  Options = GDPOptions

  def setup(self, problem, start, env_config, share_weights_with=None,
            extra_signature=None):
    """The `LearnedSetup` of `problem`; its network uses the weights of
    `share_weights_with` (another graph's `GDPNetwork`) if given, else its
    own, started from `pretrained` if set."""
    from tfplace.rl.builders import gdp_setup
    options = self.options
    sizes = {k: getattr(options, k) for k in (
        "sage_layers", "attention_layers", "heads", "segment_length")}
    setup = gdp_setup(problem, start.group_devices, start.step_time_s,
                      env_config, sizes, extra_signature, share_weights_with)
    if options.pretrained and share_weights_with is None:
      from tfplace.rl.transfer import load_network
      source = load_network(setup.actor_net, options.pretrained,
                            _transfer_sizes(setup.actor_net))
      logging.info("gdp: network weights from %s", source)
    return setup

  def train_on_graphs(self, problems: Mapping[str, object],
                      seed: Optional[int] = None) -> Dict[str, Placement]:
    """GDP's batch training: one policy searched on every graph at once.

    Every graph starts from its own `init` placement and keeps its own
    per-unit biases, best-so-far and checkpoint (`<logdir>/graphs/<name>/`);
    the networks share every other weight and one optimizer, and the graphs
    take train steps in turn for `budget_s` seconds in all. With a logdir
    the shared weights are written to `<logdir>/network/` at the end, so
    `pretrained=<logdir>` starts a search on another graph from them.

    Args:
      problems: graph name (letters, digits, '_', '-', '.') -> its
        `PlacementProblem`; two or more, on clusters with as many devices.
      seed: seeds the start placements and the training.

    Returns:
      graph name -> its best placement found (metadata "search": the
      graph's search summary and "batch_graphs").

    Raises:
      PlacementError: fewer than two graphs, a bad name, a graph with one
        colocation group, a cluster with one device or another device
        count, or a start placement that does not fit in memory.
    """
    from tfplace.rl.batch_training import (check_graph_names, graph_logdir,
                                           run_batch_training)
    check_graph_names(problems)
    names = sorted(problems)
    devices = {n: problems[n].cluster.num_devices for n in names}
    if len(set(devices.values())) > 1:
      raise PlacementError(f"batch training places every graph on as many "
                           f"devices; the clusters have {devices}: give every "
                           f"graph one cluster")
    options = self.options
    for name in names:
      if common.trivial_placement(problems[name]) is not None:
        raise PlacementError(f"{name}: one colocation group or one device, "
                             f"nothing to learn: leave it out of the batch")
    starts = {name: common.feasible_start(problems[name], options.init, seed,
                                          self.name) for name in names}
    started_at = time.time()  # The budget: all that follows the starts.
    setups, shared = {}, None
    for name in names:
      problem = problems[name]
      # The first graph's network is built (from `pretrained` if set); the
      # others use its weights.
      setup = self.setup(problem, starts[name], common.env_config(options),
                         share_weights_with=shared,
                         extra_signature={"batch_graphs": names})
      setup.export_best = common.exporter(
          problem, self.name, graph_logdir(options.logdir, name))
      setups[name] = setup
      if shared is None:
        shared = setup.actor_net
    results = run_batch_training(setups, self.agent_config(),
                                 common.search_config(options), seed,
                                 started_at)
    self.after_search(setups[names[0]])
    return {name: problems[name].placement(
        results[name].best_devices, placer=self.name).with_metadata(
            extra={"search": {**results[name].summary(starts[name]),
                              "batch_graphs": names}})
            for name in names}

  def after_search(self, setup) -> None:
    if self.options.logdir:
      from tfplace.rl.transfer import save_network
      save_network(setup.actor_net, self.options.logdir,
                   _transfer_sizes(setup.actor_net))


def _transfer_sizes(network):
  """What a network must share with a saved one to take its weights."""
  from tfplace.rl.features import SHARED_VOCABULARY
  return {**network.transfer_sizes(), "vocabulary": list(SHARED_VOCABULARY)}
