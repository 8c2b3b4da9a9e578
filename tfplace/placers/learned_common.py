"""What the learned placers share: options, the trivial cases, the search.

A learned placer (`colocrl`, `hierarchical`, `placeto`, `gdp`, `mars`)
picks a start placement (the best heuristic by default), builds its
environment and networks (`tfplace.rl.builders`), runs the shared search
loop (`tfplace.rl.search`) and returns the best feasible placement found.
A graph with one colocation group or a cluster with one device has nothing
to learn: the placer returns the best placement at once (at most one
simulation per device).

Nothing here imports TensorFlow or tf-agents at module level.
"""

import dataclasses
import math
import os
import time
from typing import Optional

import numpy as np
from absl import logging

from tfplace import interrupts
from tfplace.errors import PlacementError
from tfplace.placement import Placement
from tfplace.placers.base import Placer, PlacerKind
from tfplace.placers.search_support import Budget, start_placement

COMMON_ATTRIBUTES = """
    agent: "reinforce" (ReinforceAgent) or "ppo" (PPOClipAgent).
    baseline: REINFORCE's baseline: "moving_average", "value" or "per_step"
      (the batch's mean return at the same step).
    budget_s: wall-time budget of the search in seconds (resumes included),
      counted once the start placement is found: building the networks,
      pre-training them (mars), compiling the train step and the search all
      count; the search ends with the train step that spends it.
    max_samples: sample budget: placements drawn from the policy.
    batch_size: placements per policy call (one simulate_batch each).
    lr: Adam learning rate; none: 3e-3 for reinforce, 2e-3 for ppo.
    entropy: entropy regularization weight.
    ppo_epochs: PPO epochs per batch (unrolled into the graph: keep small).
    ppo_ratio: PPO's importance ratio: "per_unit" (geometric mean over the
      action's units, clipped per unit) or "joint" (tf-agents' product).
    reward: reward shaping: "relative" (1 - t / t_start) or "neg_sqrt".
    memory_rule: placements over memory: "penalty" or "repair".
    init: the start placement: best_heuristic (every heuristic placer, the
      fastest feasible one), a placer name, or a placement JSON file made for
      this graph and cluster (the search placers' option of the same name).
    warm_start: "imitation" (the policy starts at the start placement) or
      "baseline" (only the baseline and best-so-far start there).
    explore: after imitation, units a sample changes, on average.
    replay_best: copies of the best placement so far replayed in every
      train batch (self-imitation); 0: off.
    reexplore_after: train batches without a better placement after which
      the policy is fitted again to the best placement so far (as the
      imitation warm start, `explore` units changed per sample); 0: never.
    hidden: width of the policy network (the seq2seq placers' LSTMs; gdp's
      graph embedding and attention; placeto's embedding and head).
    bias_scale: speed of the per-unit logit biases relative to the network
      weights (Adam moves each by about lr per step).
    logdir: directory for checkpoints, TensorBoard curves and the best
      placement (JSON and placed GraphDef); none: no files.
    resume: continue the search checkpointed in logdir.
    restart: discard an incompatible or unreadable checkpoint in logdir.
    progress: show a progress bar."""


@dataclasses.dataclass(frozen=True)
class LearnedOptions:
  agent: str = "reinforce"
  baseline: str = "moving_average"
  budget_s: float = 300.0
  max_samples: int = 100_000
  batch_size: int = 32
  lr: Optional[float] = None
  entropy: float = 0.0
  ppo_epochs: int = 3
  ppo_ratio: str = "per_unit"
  reward: str = "relative"
  memory_rule: str = "repair"
  init: str = "best_heuristic"
  warm_start: str = "imitation"
  explore: float = 2.0
  replay_best: int = 4
  reexplore_after: int = 40
  hidden: int = 64
  bias_scale: float = 30.0
  logdir: Optional[str] = None
  resume: bool = False
  restart: bool = False
  progress: bool = True

  def __post_init__(self):
    choices = {"agent": ("reinforce", "ppo"),
               "baseline": ("moving_average", "value", "per_step"),
               "reward": ("relative", "neg_sqrt"),
               "memory_rule": ("penalty", "repair"),
               "warm_start": ("imitation", "baseline"),
               "ppo_ratio": ("per_unit", "joint")}
    for name, valid in choices.items():
      if getattr(self, name) not in valid:
        raise PlacementError(f"option {name} must be one of {list(valid)}, "
                             f"got {getattr(self, name)!r}")
    Budget(seconds=self.budget_s)  # Raises on a bad budget.
    for name in ("max_samples", "batch_size"):
      if getattr(self, name) < 1:
        raise PlacementError(
            f"option {name} must be >= 1, got {getattr(self, name)}")
    if self.reexplore_after < 0:
      raise PlacementError(
          f"option reexplore_after must be >= 0, got {self.reexplore_after}")
    if self.resume and not self.logdir:
      raise PlacementError("resume needs a logdir: give --logdir DIR (the "
                           "option logdir), the folder of the search to "
                           "continue")
    if self.logdir and os.path.exists(self.logdir) and not os.path.isdir(
        self.logdir):
      raise PlacementError(f"logdir {self.logdir} is a file: give a folder "
                           "for the search's checkpoints, curves and best "
                           "placement")


LearnedOptions.__doc__ = ("Options of a learned placer.\n\n  Attributes:" +
                          COMMON_ATTRIBUTES + "\n  ")


class LearnedPlacer(Placer):
  """A placer that learns a policy by searching on the simulator.

  Subclasses implement `setup` (environment, networks) and cite their paper.
  """

  kind = PlacerKind.LEARNED
  Options = LearnedOptions

  def setup(self, problem, start, env_config):
    """The `tfplace.rl.search.LearnedSetup` for `problem` from `start`."""
    raise NotImplementedError

  def agent_config(self):
    """The `tfplace.rl.agents.AgentConfig` of the search."""
    return agent_config(self.options)

  def before_search(self, setup, seed: Optional[int]) -> Optional[dict]:
    """Called with the `LearnedSetup` before the search (e.g. to pre-train
    a network; its time counts against `budget_s`); what it returns joins
    the search summary."""
    del setup, seed
    return None

  def after_search(self, setup) -> None:
    """Called with the `LearnedSetup` once the search has ended."""

  def place(self, problem, seed: Optional[int] = None) -> Placement:
    trivial = trivial_placement(problem)
    if trivial is not None:
      logging.info("%s: one group or one device, nothing to learn",
                   self.name)
      return problem.placement(trivial, placer=self.name)
    from tfplace.rl.search import run_search
    start = feasible_start(problem, self.options.init, seed, self.name)
    started_at = time.time()  # The budget: all that follows the start.
    setup = self.setup(problem, start, env_config(self.options))
    setup.export_best = exporter(problem, self.name, self.options.logdir)
    before = self.before_search(setup, seed)
    result = run_search(setup, self.agent_config(),
                        search_config(self.options), seed, started_at)
    with interrupts.writes_allowed():  # A search stopped by Ctrl-C too.
      self.after_search(setup)
    placement = problem.placement(result.best_devices, placer=self.name)
    summary = {**result.summary(start), **(before or {})}
    return placement.with_metadata(extra={"search": summary})


def feasible_start(problem, init: str, seed: Optional[int], placer: str):
  """The search's `StartPlacement` (`search_support.start_placement`).

  Raises:
    PlacementError: it does not fit in memory.
  """
  start = start_placement(problem, init, seed)
  logging.info("%s: start %s at %.6g s", placer, start.source,
               start.step_time_s)
  if not math.isfinite(start.step_time_s):
    raise PlacementError(
        f"the start placement ({start.source}) does not fit in memory: "
        "nothing feasible to start the search from (a cluster with more "
        "memory, or a start placement that fits)")
  return start


def trivial_placement(problem) -> Optional[np.ndarray]:
  """With one group or one device: the best group placement, else None.

  Raises:
    PlacementError: nothing fits.
  """
  groups, num_devices = problem.groups, problem.cluster.num_devices
  if groups.num_groups > 1 and num_devices > 1:
    return None
  candidates = np.array([np.full(groups.num_groups, d, np.int32)
                         for d in range(num_devices)
                         if groups.allowed[:, d].all()])
  times = (problem.simulate_groups(candidates) if len(candidates)
           else np.zeros(0))
  if not np.isfinite(times).any():
    raise PlacementError("no placement fits: the cluster has one device or "
                         "the graph one group, and it fits on no device")
  return candidates[int(np.argmin(times))]


def agent_config(options: LearnedOptions):
  from tfplace.rl.agents import AgentConfig
  return AgentConfig(kind=options.agent, baseline=options.baseline,
                     lr=options.lr,
                     entropy_regularization=options.entropy,
                     ppo_epochs=options.ppo_epochs, ppo_ratio=options.ppo_ratio)


def env_config(options: LearnedOptions):
  from tfplace.rl.builders import EnvConfig
  from tfplace.rl.environments.rewards import RewardConfig
  extra = {k: getattr(options, k) for k in ("num_chunks", "num_groups")
           if hasattr(options, k)}
  return EnvConfig(batch_size=options.batch_size,
                   reward=RewardConfig(shaping=options.reward),
                   memory_rule=options.memory_rule, hidden=options.hidden,
                   bias_scale=options.bias_scale,
                   shared_logits=options.agent != "ppo", **extra)


def search_config(options: LearnedOptions):
  from tfplace.rl.search import SearchConfig
  return SearchConfig(
      budget_s=options.budget_s, max_samples=options.max_samples,
      warm_start=options.warm_start, explore=options.explore,
      replay_best=options.replay_best,
      reexplore_after=options.reexplore_after,
      logdir=options.logdir, resume=options.resume, restart=options.restart,
      progress=options.progress)


def exporter(problem, placer: str, logdir: Optional[str]):
  """Writes the best placement (JSON, placed GraphDef) into `logdir`."""
  if not logdir:
    return None

  def export(devices: np.ndarray, step_time_s: float) -> None:
    from tfplace.graph.graph_io import write_graph_file
    placement = problem.placement(devices, placer=placer).with_metadata(
        predicted_step_time_s=step_time_s, feasible=True)
    placement.save(os.path.join(logdir, "best_placement.json"))
    if problem.graph.graph_def is not None:
      write_graph_file(os.path.join(logdir, "best_placement.pbtxt"),
                       placement.to_graph_def(problem.graph))
  return export
