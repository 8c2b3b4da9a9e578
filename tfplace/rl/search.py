"""The search loop every learned placer shares.

One paragraph, as grappler's `PlaceGraph` reads: build the agent on the CPU;
open (or resume) the checkpoint; on a fresh start, score the start placement
(the best heuristic), make it the best-so-far and the baseline's starting
point, and (warm start "imitation") teach it to the policy; then, until the
time or sample budget is spent: sample a batch of placements with the
collect policy, simulate them in one batch, keep the fastest feasible one,
train the agent on the batch, write the curves, advance the progress bar,
and checkpoint now and then. Ctrl-C stops the loop cleanly (checkpointed);
the best placement found is returned and is always feasible.
"""

import dataclasses
import os
import time
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf
from absl import logging
from tf_agents.policies import py_tf_eager_policy
from tf_agents.specs import tensor_spec
from tf_agents.utils import common
from tqdm.auto import tqdm

from tfplace.errors import PlacementError
from tfplace.placers.learned_support import BestSoFar, Budget
from tfplace.rl import agents as agents_lib
from tfplace.rl import experience as experience_lib
from tfplace.rl import imitation
from tfplace.rl.environments.placement_environment import PlacementEnvironment
from tfplace.rl.environments.rewards import rewards
from tfplace.rl.search_state import SearchState, open_checkpointer

WARM_STARTS = ("imitation", "baseline")


@dataclasses.dataclass(frozen=True)
class SearchConfig:
  """Budgets, warm start and bookkeeping of a learned search.

  Attributes:
    budget_s: wall-time budget in seconds (over all resumed runs).
    max_samples: sample budget (placements drawn from the policy).
    warm_start: "imitation" (teach the start placement, then search) or
      "baseline" (only start the baseline and the best-so-far there).
    explore: after imitation, units expected to differ from the start.
    logdir: where checkpoints and curves go (None: neither).
    resume: continue the checkpoint in `logdir`.
    restart: discard an incompatible or unreadable checkpoint in `logdir`.
    checkpoint_every_s: seconds between checkpoints.
    progress: show a tqdm bar.
    use_tf_function: compile the policy and the train step with tf.function
      (False runs them eagerly: slower per step, no tracing; for tiny
      problems and debugging).
  """
  budget_s: float = 300.0
  max_samples: int = 100_000
  warm_start: str = "imitation"
  explore: float = 2.0
  logdir: Optional[str] = None
  resume: bool = False
  restart: bool = False
  checkpoint_every_s: float = 60.0
  progress: bool = True
  use_tf_function: bool = True

  def __post_init__(self):
    if self.warm_start not in WARM_STARTS:
      raise PlacementError(f"unknown warm start {self.warm_start!r}; choose "
                           f"one of {list(WARM_STARTS)}")
    if not self.budget_s > 0 or self.max_samples < 1:
      raise PlacementError("budget_s must be > 0 and max_samples >= 1")
    if self.resume and not self.logdir:
      raise PlacementError("resume needs a logdir")


@dataclasses.dataclass(frozen=True)
class CurvePoint:
  """One train step: samples so far, wall time, batch mean and best."""
  samples: int
  wall_s: float
  mean_step_time_s: float
  best_step_time_s: float


@dataclasses.dataclass(frozen=True)
class SearchResult:
  """What a search found and what it cost.

  Attributes:
    best_devices: int32 [G], device per colocation group (feasible).
    best_step_time_s: its simulated step time.
    start_step_time_s: the start placement's step time.
    samples: placements drawn over the whole search (resumes included).
    evaluations: simulator evaluations (repairs included).
    train_steps: agent train steps.
    wall_time_s: wall time over the whole search.
    samples_per_s: samples / wall time of this run.
    resumed: whether this run continued a checkpoint.
    stopped_by: "time_s", "max_samples" or "interrupted".
    curve: per train step of this run.
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
  """
  env: PlacementEnvironment
  actor_net: object
  value_net: object
  start_devices: np.ndarray
  start_step_time_s: float
  signature: Dict[str, object]
  export_best: Optional[Callable[[np.ndarray, float], None]] = None


class SearchLoop:
  """One run of the search: the agent, its policy and train step, the
  checkpointed state, and `step` (one batch: sample, simulate, keep the best,
  train). `run_search` drives it; benchmarks time its parts."""

  def __init__(self, setup: LearnedSetup, agent_config, config: SearchConfig):
    self.setup, self.config, self.env = setup, config, setup.env
    specs = tensor_spec.from_spec
    self.agent, self.stats = agents_lib.make_agent(
        specs(self.env.time_step_spec()), specs(self.env.action_spec()),
        setup.actor_net, setup.value_net, agent_config,
        num_units=experience_lib.num_action_dims(self.env.action_spec()))
    self.state = SearchState(self.env.codec.num_groups)
    self.checkpointer = None
    self.resumed = False
    if config.logdir:
      self.checkpointer = open_checkpointer(
          config.logdir, setup.signature, config.resume, config.restart,
          agent=self.agent, reward_stats=self.stats, search_state=self.state)
      self.resumed = int(self.state.samples.numpy()) > 0
    self.budget = Budget(config.budget_s, config.max_samples)
    self.best = BestSoFar()
    if self.resumed:
      self.best.offer(self.state.best_devices.numpy()[None],
                      self.state.best_step_time_s.numpy()[None],
                      int(self.state.samples.numpy()))
    compiled = config.use_tf_function
    self.policy = py_tf_eager_policy.PyTFEagerPolicy(
        self.agent.collect_policy, use_tf_function=compiled)
    self.train = (common.function(self.agent.train) if compiled
                  else self.agent.train)
    self._entropy = (common.function(self._policy_entropy) if compiled
                     else self._policy_entropy)
    self.writer = (tf.summary.create_file_writer(
        os.path.join(config.logdir, "summaries")) if config.logdir else
                   tf.summary.create_noop_writer())
    self.curve: List[CurvePoint] = []
    self.exported = np.inf
    self._counted = self.env.evaluator.num_evaluations

  def warm_start(self) -> None:
    """Best-so-far, baseline and (imitation) policy at the start placement."""
    setup, env = self.setup, self.env
    start = np.asarray(setup.start_devices, dtype=np.int32)[None]
    self.keep_best(start, np.array([setup.start_step_time_s]))
    reward = rewards(np.array([setup.start_step_time_s]), env.reference_s,
                     env.reward_config)[0]
    self.stats.start_at(float(reward))
    if self.config.warm_start == "imitation":
      target = env.codec.encode(setup.start_devices)
      observation = tf.nest.map_structure(lambda x: x[0], env.reset().observation)
      p = imitation.imitate(setup.actor_net, observation, target,
                            self.config.explore)
      logging.info("imitation warm start: target probability %.4f", p)

  def step(self) -> Tuple[float, float]:
    """One batch: sample, simulate, keep the best, train. (loss, mean t)."""
    time_step = self.env.reset()
    action_step = self.policy.action(time_step)
    next_time_step = self.env.step(action_step.action)
    self.keep_best(self.env.last_devices, self.env.last_step_times)
    experience = experience_lib.one_step_episodes(time_step, action_step,
                                                  next_time_step)
    loss = self.train(experience).loss
    self.stats.update(next_time_step.reward)
    times = self.env.last_step_times
    self.state.samples.assign_add(len(times))
    self.state.evaluations.assign_add(self.env.evaluator.num_evaluations -
                                      self._counted)
    self._counted = self.env.evaluator.num_evaluations
    finite = times[np.isfinite(times)]
    return float(loss), float(finite.mean()) if len(finite) else np.inf

  def keep_best(self, devices: np.ndarray, step_times: np.ndarray) -> None:
    """Offers placements to the best-so-far; mirrors it into the state."""
    if self.best.offer(devices, step_times, int(self.state.samples.numpy())):
      self.state.best_devices.assign(self.best.devices)
      self.state.best_step_time_s.assign(self.best.step_time_s)

  def summarize(self, loss: float, mean_t: float, rate: float) -> None:
    step = int(self.state.samples.numpy())
    best = float(self.state.best_step_time_s.numpy())
    with self.writer.as_default():
      tf.summary.scalar("loss", loss, step=step)
      tf.summary.scalar("reward/mean", float(self.env.last_rewards.mean()),
                        step=step)
      tf.summary.scalar("reward/best", float(rewards(
          np.array([best]), self.env.reference_s,
          self.env.reward_config)[0]), step=step)
      tf.summary.scalar("step_time/mean_s", mean_t, step=step)
      tf.summary.scalar("step_time/best_s", best, step=step)
      tf.summary.scalar("entropy", self.entropy(), step=step)
      tf.summary.scalar("samples_per_s", rate, step=step)

  def entropy(self) -> float:
    """Mean entropy of the collect policy (nats, summed over units)."""
    time_step = tf.nest.map_structure(tf.convert_to_tensor, self.env.reset())
    return float(self._entropy(time_step))

  def _policy_entropy(self, time_step) -> tf.Tensor:
    dist = self.agent.collect_policy.distribution(time_step).action
    return tf.reduce_mean(common.entropy(dist, self.agent.action_spec))

  def save(self) -> None:
    if self.checkpointer is not None:
      self.checkpointer.save(global_step=self.state.samples.numpy())
    best = float(self.state.best_step_time_s.numpy())
    if self.setup.export_best is not None and best < self.exported:
      self.setup.export_best(self.state.best_devices.numpy(), best)
      self.exported = best


def _stop_reason(loop: SearchLoop, start: float) -> Optional[str]:
  elapsed = float(loop.state.elapsed_s.numpy()) + time.time() - start
  return loop.budget.exhausted(elapsed, int(loop.state.samples.numpy()))


def run_search(setup: LearnedSetup, agent_config: agents_lib.AgentConfig,
               config: SearchConfig, seed: Optional[int] = None
               ) -> SearchResult:
  """Runs (or resumes) a learned search; see the module docstring.

  Args:
    setup: the environment, networks, start placement and signature.
    agent_config: the agent.
    config: budgets, warm start, logdir.
    seed: seeds TensorFlow's and NumPy's random generators.

  Returns:
    The `SearchResult`; its placement is the best feasible one seen.
  """
  if seed is not None:
    tf.random.set_seed(seed)
    np.random.seed(seed)
  start = time.time()
  with tf.device("/CPU:0"):
    loop = SearchLoop(setup, agent_config, config)
    if not loop.resumed:
      loop.warm_start()
    return _run(loop, start)


def _run(loop: SearchLoop, start: float) -> SearchResult:
  """The budgeted loop with progress, curves, checkpoints and Ctrl-C."""
  config, state = loop.config, loop.state
  first_samples = int(state.samples.numpy())
  last_save = start
  bar = tqdm(total=config.max_samples, initial=first_samples,
             unit="placement", disable=not config.progress,
             desc="learned search")
  stopped_by = _stop_reason(loop, start)
  try:
    while stopped_by is None:
      loss, mean_t = loop.step()
      now = time.time()
      samples = int(state.samples.numpy())
      rate = (samples - first_samples) / max(now - start, 1e-9)
      best = float(state.best_step_time_s.numpy())
      loop.curve.append(CurvePoint(samples, float(state.elapsed_s.numpy()) +
                                   now - start, mean_t, best))
      loop.summarize(loss, mean_t, rate)
      bar.update(samples - bar.n)
      bar.set_postfix(best_ms=f"{best * 1e3:.2f}", rate=f"{rate:.0f}/s")
      if now - last_save >= config.checkpoint_every_s:
        _checkpoint(loop, start)
        start, last_save = time.time(), time.time()
        first_samples = samples
      stopped_by = _stop_reason(loop, start)
  except KeyboardInterrupt:
    logging.warning("search interrupted: checkpointing the best so far")
    stopped_by = "interrupted"
  finally:
    bar.close()
  return _finish(loop, start, stopped_by)


def _checkpoint(loop: SearchLoop, start: float) -> None:
  """Adds the time since `start` to the elapsed time, then saves."""
  loop.state.elapsed_s.assign_add(time.time() - start)
  loop.save()
  loop.writer.flush()


def _finish(loop: SearchLoop, start: float, stopped_by: str) -> SearchResult:
  _checkpoint(loop, start)
  state = loop.state
  best = float(state.best_step_time_s.numpy())
  if not np.isfinite(best):
    raise PlacementError("the learned search found no placement that fits "
                         "in memory")
  samples = int(state.samples.numpy())
  total_s = float(state.elapsed_s.numpy())
  return SearchResult(
      best_devices=state.best_devices.numpy().copy(), best_step_time_s=best,
      start_step_time_s=float(loop.setup.start_step_time_s), samples=samples,
      evaluations=int(state.evaluations.numpy()),
      train_steps=int(loop.agent.train_step_counter.numpy()),
      wall_time_s=total_s, samples_per_s=samples / max(total_s, 1e-9),
      resumed=loop.resumed, stopped_by=stopped_by, curve=tuple(loop.curve))
