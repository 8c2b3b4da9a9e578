"""The search loop every learned placer shares.

One paragraph, as grappler's `PlaceGraph` reads: build the agent on the CPU;
open (or resume) the checkpoint; on a fresh start, score the start placement
(the best heuristic), make it the best-so-far and the baseline's starting
point, and (warm start "imitation") fit the policy to it; then, until the
time or sample budget is spent or Ctrl-C: sample a batch of placements with
the collect policy, simulate them in one batch, keep the fastest feasible
one, train the agent on the batch (plus the incumbent, replayed; eagerly
until the budget left repays compiling the train step), write the curves,
and checkpoint now and then. The best placement found is returned
and is always feasible. Budget, best-so-far, progress bar and Ctrl-C are the
search placers' `SearchRun`.
"""

import dataclasses
import time
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf
from absl import logging

from tfplace.errors import PlacementError
from tfplace.placers.search_support import Budget, SearchRun
from tfplace.rl.environments.placement_environment import PlacementEnvironment
from tfplace.rl.search_loop import SearchLoop

WARM_STARTS = ("imitation", "baseline")


@dataclasses.dataclass(frozen=True)
class SearchConfig:
  """Budgets, warm start and bookkeeping of a learned search.

  Attributes:
    budget_s: wall-time budget in seconds (over all resumed runs), from
      `run_search`'s `started_at`; the search stops after the train step
      that spends it.
    max_samples: sample budget (placements drawn from the policy).
    warm_start: "imitation" (fit the policy to the start placement, then
      search) or "baseline" (only start the baseline and the best-so-far
      there).
    explore: after imitation, units expected to differ from the start.
    replay_best: copies of the best placement so far added to every train
      batch with its reward (self-imitation: the policy keeps being pulled
      towards the incumbent; 0: off).
    reexplore_after: batches without a better placement after which the
      policy is fitted again to the best placement so far, as the warm start
      fits the start placement, so that samples differ from it in about
      `explore` units again (`SearchLoop.reexplore`); 0: never.
    logdir: where checkpoints and curves go (None: neither).
    resume: continue the checkpoint in `logdir`.
    restart: discard an incompatible or unreadable checkpoint in `logdir`.
    checkpoint_every_s: seconds between checkpoints.
    entropy_every: train steps between entropy summaries.
    progress: show a tqdm bar.
    use_tf_function: compile the policy and the train step with tf.function
      (False runs them eagerly: slower per step, no tracing; for tiny
      problems and debugging).
    fine_tune: resume the checkpoint with another evaluator (measured step
      times, `tfplace.real`): the restored best is evaluated again with it,
      and `budget_s` and `max_samples` count from this run, not over the
      resumed runs.
  """
  budget_s: float = 300.0
  max_samples: int = 100_000
  warm_start: str = "imitation"
  explore: float = 2.0
  replay_best: int = 4
  reexplore_after: int = 40
  logdir: Optional[str] = None
  resume: bool = False
  restart: bool = False
  checkpoint_every_s: float = 60.0
  entropy_every: int = 10
  progress: bool = True
  use_tf_function: bool = True
  fine_tune: bool = False

  def __post_init__(self):
    if self.warm_start not in WARM_STARTS:
      raise PlacementError(f"unknown warm start {self.warm_start!r}; choose "
                           f"one of {list(WARM_STARTS)}")
    if not self.budget_s > 0 or self.max_samples < 1:
      raise PlacementError("budget_s must be > 0 and max_samples >= 1")
    if self.reexplore_after < 0:
      raise PlacementError(
          f"reexplore_after must be >= 0, got {self.reexplore_after}")
    if (self.resume or self.fine_tune) and not self.logdir:
      raise PlacementError("resume (and fine_tune) needs a logdir")


@dataclasses.dataclass(frozen=True)
class CurvePoint:
  """One train step: samples so far, wall time, batch mean and best."""
  samples: int
  wall_s: float
  mean_step_time_s: float
  best_step_time_s: float


@dataclasses.dataclass(frozen=True)
class LearnedResult:
  """What a learned search found and what it cost.

  Attributes:
    best_devices: int32 [G], device per colocation group (feasible).
    best_step_time_s: its simulated step time.
    start_step_time_s: the start placement's step time.
    samples: placements drawn over the whole search (resumes included).
    evaluations: simulator evaluations (repairs included).
    train_steps: agent train steps.
    wall_time_s: wall time over the whole search.
    samples_per_s: samples / wall time.
    resumed: whether this run continued a checkpoint.
    stopped_by: "time_s", "max_samples", "interrupted" or "stopped" (the
      evaluator stopped the search, e.g. a dead worker of a real cluster).
    curve: per train step of this run.
    reexplorations: times this run fitted the policy again to its best
      placement (`SearchConfig.reexplore_after`).
    skipped_updates: train steps this run undid because they left the
      policy non-finite (`update_guard.GuardedTrain`).
  """
  best_devices: np.ndarray
  best_step_time_s: float
  start_step_time_s: float
  samples: int
  evaluations: int
  train_steps: int
  wall_time_s: float
  samples_per_s: float
  resumed: bool
  stopped_by: str
  curve: Tuple[CurvePoint, ...]
  reexplorations: int = 0
  skipped_updates: int = 0

  def summary(self, start=None, points: int = 8) -> dict:
    """JSON-ready figures for placement metadata and tables: the keys of
    the search placers' `SearchResult.summary()` (step times, evaluations,
    seconds, interrupted), then the learned search's own (samples, train
    steps, how it stopped, re-explorations, `points` points of its curve:
    samples, wall s, best and mean step time).

    Args:
      start: the `StartPlacement` (its source is reported), or None.
    """
    curve = self.curve
    picks = sorted({int(round(k * (len(curve) - 1) / max(points - 1, 1)))
                    for k in range(points)}) if curve else []
    return {
        "step_time_s": _finite(self.best_step_time_s),
        "start": start.source if start is not None else None,
        "start_step_time_s": _finite(self.start_step_time_s),
        "evaluations": self.evaluations,
        "seconds": round(self.wall_time_s, 3),
        "evaluations_per_s": round(
            self.evaluations / max(self.wall_time_s, 1e-9), 1),
        "interrupted": self.stopped_by == "interrupted",
        "samples": self.samples, "samples_per_s": self.samples_per_s,
        "train_steps": self.train_steps, "stopped_by": self.stopped_by,
        "resumed": self.resumed, "reexplorations": self.reexplorations,
        "skipped_updates": self.skipped_updates,
        "curve": [[curve[i].samples, round(curve[i].wall_s, 2),
                   _finite(curve[i].best_step_time_s),
                   _finite(curve[i].mean_step_time_s)] for i in picks]}


def _finite(x: float) -> Optional[float]:
  return float(x) if np.isfinite(x) else None


@dataclasses.dataclass
class LearnedSetup:
  """What a placer hands the loop.

  Attributes:
    env: the placement environment (batched).
    actor_net: the policy network.
    value_net: the value network.
    start_devices: int [G], the start placement (feasible).
    start_step_time_s: its step time.
    signature: the problem's identity, for checkpoints.
    export_best: called with (devices, step time) at each checkpoint where
      the best-so-far changed, and at the end.
    loop_class: the `SearchLoop` subclass that runs it (None: `SearchLoop`,
      one-step episodes; Placeto's progressive episodes bring their own).
  """
  env: PlacementEnvironment
  actor_net: object
  value_net: object
  start_devices: np.ndarray
  start_step_time_s: float
  signature: Dict[str, object]
  export_best: Optional[Callable[[np.ndarray, float], None]] = None
  loop_class: Optional[type] = None


def run_search(setup: LearnedSetup, agent_config, config: SearchConfig,
               seed: Optional[int] = None,
               started_at: Optional[float] = None) -> LearnedResult:
  """Runs (or resumes) a learned search; see the module docstring.

  Args:
    setup: the environment, networks, start placement and signature.
    agent_config: a `tfplace.rl.agents.AgentConfig`.
    config: budgets, warm start, logdir.
    seed: seeds TensorFlow's and NumPy's random generators.
    started_at: the `time.time()` at which the time budget started (the
      placer's: before it built the networks and pre-trained them); None:
      now.

  Returns:
    The `LearnedResult`; its placement is the best feasible one seen.
  """
  if seed is not None:
    tf.random.set_seed(seed)
    np.random.seed(seed)
  t0 = time.time() if started_at is None else started_at
  with tf.device("/CPU:0"):
    loop = (setup.loop_class or SearchLoop)(setup, agent_config, config)
    devices, step_time_s = loop.start()
    return _run(loop, devices, step_time_s, t0)


def stop_reason(loop: SearchLoop, elapsed_s: float,
                samples_before: int = 0) -> Optional[str]:
  """"time_s" or "max_samples" when `loop`'s budget is spent after
  `elapsed_s` seconds over the search, else None."""
  if elapsed_s >= loop.config.budget_s:
    return "time_s"
  if loop.samples - samples_before >= loop.config.max_samples:
    return "max_samples"
  return None


def _run(loop: SearchLoop, devices: np.ndarray, step_time_s: float,
         t0: float) -> LearnedResult:
  """The budgeted loop: curves, checkpoints, Ctrl-C (via `SearchRun`)."""
  config, env = loop.config, loop.env
  before_s = float(loop.state.elapsed_s.numpy())
  stopped = stop_reason(loop, loop.spent_before_s + time.time() - t0,
                        loop.samples_before)
  curve: List[CurvePoint] = []
  if stopped is None:
    simulate = env.evaluator.simulate
    budget = Budget(seconds=max(config.budget_s - loop.spent_before_s
                                - (time.time() - t0), 1e-3))
    with SearchRun(simulate, budget, devices, step_time_s,
                   desc="learned search", progress=config.progress) as run:
      env.evaluator.simulate = run.evaluate
      try:
        stopped = _loop(loop, run, curve, before_s, t0)
      finally:
        env.evaluator.simulate = simulate
  if curve or not loop.resumed:
    loop.save(before_s + time.time() - t0)
  else:
    # A resumed search whose budget was already spent keeps its checkpoint
    # as it was: the agent's optimizer state is restored only when a train
    # step builds it, so saving again would drop it.
    note_spent_resume([loop], stopped)
  return learned_result(loop, stopped, curve)


def note_spent_resume(loops: List[SearchLoop], stopped: str) -> None:
  """Says, in one line, that the resumed search of `loops` had nothing
  left to search (`stopped`: its spent budget), and quiets the restore."""
  for loop in loops:
    loop.end_spent_resume()
  loop = loops[0]
  config = loop.config
  spent = (f"{loop.samples - loop.samples_before} of max_samples "
           f"{config.max_samples} samples" if stopped == "max_samples" else
           f"{loop.spent_before_s:.3g} s of budget_s {config.budget_s:g}")
  logging.warning(
      "the resumed search's budget was already spent (%s): nothing more to "
      "search; the result is its best placement so far%s", spent,
      "" if len(loops) > 1 else f" ({loop.best_step_time_s * 1e3:.4g} ms)")


def train_step(loop: SearchLoop, curve: List[CurvePoint], first: int,
               before_s: float, t0: float, share: float = 1.0) -> float:
  """One train step of `loop`: its point appended to `curve` and its
  summaries written (samples/s since `first` samples at `t0`); then the
  train step is compiled if `share` of the time budget left repays it
  (`SearchLoop.compile_if_it_pays`). Returns the time after the step."""
  drawn, started = loop.samples, time.time()
  loss, mean_t = loop.step()
  now = time.time()
  rate = (loop.samples - first) / max(now - t0, 1e-9)
  curve.append(CurvePoint(loop.samples, before_s + now - t0, mean_t,
                          loop.best_step_time_s))
  loop.summarize(loss, mean_t, rate,
                 entropy=len(curve) % loop.config.entropy_every == 1)
  left_s = loop.config.budget_s - loop.spent_before_s - (time.time() - t0)
  loop.compile_if_it_pays(now - started, loop.samples - drawn, share * left_s)
  return now


def _loop(loop: SearchLoop, run: SearchRun, curve: List[CurvePoint],
          before_s: float, t0: float) -> str:
  config = loop.config
  first, last_save = loop.samples, time.time()
  while True:
    now = train_step(loop, curve, first, before_s, t0)
    if now - last_save >= config.checkpoint_every_s:
      loop.save(before_s + now - t0)
      last_save = now
    if run.interrupted or run.stop_reason:  # Ctrl-C, or the evaluator
      return "interrupted" if run.interrupted else "stopped"
    stopped = stop_reason(loop, loop.spent_before_s + time.time() - t0,
                          loop.samples_before)
    if stopped is not None:
      return stopped


def learned_result(loop: SearchLoop, stopped: str,
                   curve: List[CurvePoint]) -> LearnedResult:
  """`loop`'s `LearnedResult`, stopped by `stopped`, with this run's curve.

  Raises:
    PlacementError: nothing found fits in memory.
  """
  best = loop.best_step_time_s
  if not np.isfinite(best):
    raise PlacementError("the learned search found no placement that fits "
                         "in memory")
  state = loop.state
  total_s = float(state.elapsed_s.numpy())
  return LearnedResult(
      best_devices=state.best_devices.numpy().copy(), best_step_time_s=best,
      start_step_time_s=float(loop.setup.start_step_time_s),
      samples=loop.samples, evaluations=int(state.evaluations.numpy()),
      train_steps=int(loop.agent.train_step_counter.numpy()),
      wall_time_s=total_s, samples_per_s=loop.samples / max(total_s, 1e-9),
      resumed=loop.resumed, stopped_by=stopped, curve=tuple(curve),
      reexplorations=loop.reexplorations,
      skipped_updates=loop.train.skipped)
