"""Mars: a contrastively pre-trained graph encoder and a light-weight
segment-level placer."""

import dataclasses

from absl import logging

from tfplace.errors import PlacementError
from tfplace.placers import learned_common as common
from tfplace.placers.registry import register_placer


@dataclasses.dataclass(frozen=True)
class MarsOptions(common.LearnedOptions):
  agent: str = "ppo"
  num_chunks: int = 64
  gcn_layers: int = 2
  segment_length: int = 32
  pretrain_steps: int = 500
  pretrain_lr: float = 1e-3
  pretrain_patience: int = 50
  pretrain_share: float = 0.25

  def __post_init__(self):
    super().__post_init__()
    bad = [f"{k} must be >= 1" for k in (
        "num_chunks", "gcn_layers", "segment_length", "hidden",
        "pretrain_patience") if getattr(self, k) < 1]
    if self.pretrain_steps < 0:
      bad.append("pretrain_steps must be >= 0")
    if not self.pretrain_lr > 0:
      bad.append("pretrain_lr must be > 0")
    if not 0 < self.pretrain_share <= 1:
      bad.append(f"pretrain_share must be in (0, 1], got "
                 f"{self.pretrain_share}")
    if bad:
      raise PlacementError(f"mars: {'; '.join(bad)}")


MarsOptions.__doc__ = (
    "Options of the Mars placer (agent defaults to ppo, as in the paper)."
    "\n\n  Attributes:" + common.COMMON_ATTRIBUTES
    + "\n    num_chunks: topological chunks of colocation groups; each chunk is"
    "\n      split by the start placement's devices into the units placed."
    "\n    gcn_layers: graph convolutions of the encoder."
    "\n    segment_length: units per segment of the placer (each segment's"
    "\n      encoder starts from the previous segment's final decoder state)."
    "\n    pretrain_steps: the most Deep Graph Infomax steps before the search"
    "\n      (0: no pre-training, the paper's ablation; not run when resuming a"
    "\n      checkpoint)."
    "\n    pretrain_lr: Adam's learning rate in pre-training."
    "\n    pretrain_patience: pre-training stops after this many steps without"
    "\n      a lower loss (the encoder keeps the lowest loss's weights)."
    "\n    pretrain_share: the most of budget_s pre-training may take (it"
    "\n      counts against the budget): it stops after the step that spends"
    "\n      it, and the log says so.\n  ")


@register_placer("mars")
class MarsPlacer(common.LearnedPlacer):
  """Mars's learned placer.

  Paper: Lan, Chen, Li, "Accelerated Device Placement Optimization with
  Contrastive Learning", ICPP 2021. A graph convolutional encoder embeds the
  unit graph; before the search it is pre-trained by Deep Graph Infomax
  (contrastive, no placements, no simulator: `tfplace.rl.contrastive`).
  A light-weight segment-level sequence-to-sequence placer then gives every
  unit a device, segment by segment (`tfplace.rl.networks.mars_network`),
  and the whole policy is trained on the simulator, with PPO by default (as
  in the paper) or REINFORCE, through the search loop every learned placer
  shares. The units are ColocRL's (`tfplace.grouping.chunks`).
  """

  Options = MarsOptions

  def setup(self, problem, start, env_config):
    from tfplace.rl.builders import mars_setup
    options = self.options
    sizes = {k: getattr(options, k) for k in ("gcn_layers", "segment_length")}
    return mars_setup(problem, start.group_devices, start.step_time_s,
                      env_config, sizes,
                      {"pretrain_steps": options.pretrain_steps})

  def before_search(self, setup, seed):
    from tfplace.rl.contrastive import pretrain
    from tfplace.rl.search_state import has_checkpoint
    options = self.options
    if not options.pretrain_steps or (options.resume and
                                      has_checkpoint(options.logdir)):
      return None  # (A resumed search restores the trained encoder.)
    network = setup.actor_net
    share_s = options.pretrain_share * options.budget_s
    report = pretrain(network.encoder, network.node_features, options.hidden,
                      options.pretrain_steps, options.pretrain_lr,
                      options.pretrain_patience, seed, options.logdir,
                      max_seconds=share_s)
    if report.stopped_by == "time":
      logging.info("mars: pre-training stopped at its share of the budget "
                   "(pretrain_share %g of budget_s %g: %.3g s)",
                   options.pretrain_share, options.budget_s, share_s)
    return {"pretrain": report.as_dict()}
