"""One learned search's working parts: agent, policy, train step, state.

`SearchLoop.step` is one batch: sample B placements with the collect policy,
simulate them (one `simulate_batch` through the evaluator, which the
`SearchRun` of `tfplace.rl.search` wraps to keep the best-so-far), add the
incumbent's episode `replay_best` times (self-imitation), train the agent,
and update the reward statistics and the checkpointed counters. After
`reexplore_after` batches without a better placement, the policy is fitted
again to the best placement so far (`reexplore`). The train step runs
eagerly until the budget left repays compiling it (`compile_if_it_pays`,
`tfplace.rl.deferred_compile`).
"""

import os
from typing import Tuple

import numpy as np
import tensorflow as tf
from absl import logging
from tf_agents.policies import py_tf_eager_policy
from tf_agents.specs import tensor_spec
from tf_agents.utils import common

from tfplace import interrupts
from tfplace.rl import agents as agents_lib
from tfplace.rl.deferred_compile import (COMPILE_AFTER_STEPS,
                                         DeferredFunction, compile_pays)
from tfplace.rl import experience as experience_lib
from tfplace.rl import imitation
from tfplace.rl.environments.rewards import rewards
from tfplace.rl.search_state import SearchState, open_checkpointer
from tfplace.rl.update_guard import GuardedTrain


class SearchLoop:
  """The agent, its compiled policy and train step, and the search state.

  Attributes:
    agent: the tf-agents agent.
    stats: its reward statistics (moving-average baseline and scale).
    state: the checkpointed counters and best-so-far.
    resumed: whether a checkpoint was restored.
    spent_before_s, samples_before: what the budgets do not count (the
      resumed runs' time; with `fine_tune`, nothing before this run).
    best_action: the action of the best placement so far (for replay).
    stalled: batches since the best placement so far last improved (this
      run; not checkpointed).
    reexplorations: times `reexplore` ran in this run.
    compile_after_steps: eager steps the budget left must hold before the
      train step is compiled (`tfplace.rl.deferred_compile`).
  """

  compile_after_steps = COMPILE_AFTER_STEPS

  def __init__(self, setup, agent_config, config, optimizer=None):
    """Builds the agent and restores the checkpoint in `config.logdir`.

    Args:
      setup: a `tfplace.rl.search.LearnedSetup`.
      agent_config: a `tfplace.rl.agents.AgentConfig`.
      config: a `tfplace.rl.search.SearchConfig`.
      optimizer: the agent's optimizer (one shared by several loops whose
        networks share weights, `tfplace.rl.batch_training`); None: a new
        one (`agents.make_optimizer`).
    """
    self.setup, self.config, self.env = setup, config, setup.env
    specs = tensor_spec.from_spec
    if optimizer is None:
      optimizer = agents_lib.make_optimizer(agent_config)
    self.agent, self.stats = agents_lib.make_agent(
        specs(self.env.time_step_spec()), specs(self.env.action_spec()),
        setup.actor_net, setup.value_net, agent_config,
        num_units=experience_lib.num_action_dims(self.env.action_spec()),
        optimizer=optimizer)
    self.state = SearchState(self.env.codec.num_groups)
    self.checkpointer, self._restored = None, None
    if config.logdir:
      # The agent joins the signature: another one's variables do not fit.
      signature = {**setup.signature, "agent": agent_config.kind}
      self.checkpointer, self._restored = open_checkpointer(
          config.logdir, signature, config.resume, config.restart,
          agent=self.agent, reward_stats=self.stats, search_state=self.state)
    self.resumed = int(self.state.samples.numpy()) > 0
    # What the budgets count: the whole search, or (fine_tune) this run.
    self.spent_before_s = (0.0 if config.fine_tune
                           else float(self.state.elapsed_s.numpy()))
    self.samples_before = self.samples if config.fine_tune else 0
    self.best_action = None
    self.stalled, self.reexplorations = 0, 0
    self.policy = py_tf_eager_policy.PyTFEagerPolicy(
        self.agent.collect_policy, use_tf_function=config.use_tf_function)
    # Eager until compiling pays (`compile_if_it_pays`).
    self._train = DeferredFunction(self.agent.train)
    self._entropy = DeferredFunction(self._policy_entropy)
    self.train = GuardedTrain(self._train,
                              [setup.actor_net, setup.value_net, optimizer])
    self.writer = (tf.summary.create_file_writer(
        os.path.join(config.logdir, "summaries")) if config.logdir else
                   tf.summary.create_noop_writer())
    self._counted = 0
    self._exported = np.inf

  @property
  def samples(self) -> int:
    return int(self.state.samples.numpy())

  @property
  def best_step_time_s(self) -> float:
    return float(self.state.best_step_time_s.numpy())

  @property
  def compiled(self) -> bool:
    """Whether the train step runs as a `tf.function`."""
    return self._train.compiled

  def compile(self) -> None:
    """Compiles the train step and the entropy summary (the next calls
    trace them; `tfplace.rl.deferred_compile`)."""
    self._train.compile()
    self._entropy.compile()

  def compile_if_it_pays(self, step_s: float, drawn: int,
                         time_left_s: float) -> None:
    """Compiles (`compile`) if the budget left holds enough steps like the
    last one (`step_s` seconds, `drawn` samples) to repay the trace
    (`deferred_compile.compile_pays`); not with `use_tf_function` off."""
    if self.compiled or not self.config.use_tf_function:
      return
    samples_left = self.config.max_samples - (self.samples -
                                              self.samples_before)
    if compile_pays(step_s, time_left_s, samples_left / max(drawn, 1),
                    self.compile_after_steps):
      logging.info("compiling the train step (%.3g s left, %.3g s an eager "
                   "step)", time_left_s, step_s)
      self.compile()

  def end_spent_resume(self) -> None:
    """For a resumed search whose budget was already spent (no train step
    follows): the optimizer's state in its checkpoint, restored only when
    a train step builds the optimizer, stays unread, as expected (TF would
    warn about each of its values at exit)."""
    if self._restored is not None:
      self._restored.expect_partial()

  def start(self) -> Tuple[np.ndarray, float]:
    """The placement the search starts from: the restored best, or (fresh)
    the start placement, with the warm start applied."""
    if self.resumed:
      devices = self.state.best_devices.numpy()
      self.best_action = self.env.codec.encode(devices)
      if self.config.fine_tune:  # Another evaluator: other units.
        self._rescore_best(devices)
      return devices, self.best_step_time_s
    setup, env = self.setup, self.env
    devices = np.asarray(setup.start_devices, dtype=np.int32)
    self.keep_best(devices[None], np.array([setup.start_step_time_s]))
    self.stats.start_at(self._reward(setup.start_step_time_s))
    if self.config.warm_start == "imitation":
      p = self._imitate(env.codec.encode(devices))
      logging.info("imitation warm start: target probability %.4f", p)
    return devices, float(setup.start_step_time_s)

  def _imitate(self, action) -> float:
    """Fits the policy's output biases to `action`, `explore` units changed
    per sample on average (`imitation.imitate`)."""
    observation = tf.nest.map_structure(lambda x: x[0],
                                        self.env.reset().observation)
    return imitation.imitate(self.setup.actor_net, observation, action,
                             self.config.explore)

  def reexplore(self) -> None:
    """Restarts the descent from the best placement so far: the policy is
    fitted to it as the warm start fits the start placement (samples differ
    from it in about `explore` units again), and the reward baseline restarts
    at its reward. The incumbent replay makes a policy collapse onto the
    best placement; once it has, its samples repeat it and the search
    stalls."""
    self._imitate(self.best_action)
    self.stats.start_at(self._reward(self.best_step_time_s))
    self.stalled = 0
    self.reexplorations += 1
    logging.info("re-exploring from the best placement so far (%.6g s)",
                 self.best_step_time_s)

  def _rescore_best(self, devices: np.ndarray) -> None:
    """The restored best evaluated with this run's evaluator; the reward
    baseline restarts at its reward."""
    times, _ = self.env.evaluator.evaluate(devices[None])
    self.state.best_step_time_s.assign(float(times[0]))
    self.stats.start_at(self._reward(float(times[0])))

  def step(self) -> Tuple[float, float]:
    """One batch (see the module docstring). Returns (loss, mean step time
    of the feasible samples)."""
    time_step = self.env.reset()
    action_step = self.policy.action(time_step)
    next_time_step = self.env.step(action_step.action)
    times = self.env.last_step_times
    self.keep_best(self.env.last_devices, times, action_step.action)
    experience = experience_lib.one_step_episodes(*experience_lib.with_replayed(
        time_step, action_step, next_time_step, self.best_action,
        self._reward(self.best_step_time_s), self.config.replay_best))
    loss = self.train(experience).loss
    self.stats.update(next_time_step.reward)
    self.state.samples.assign_add(len(times))
    evaluations = self.env.evaluator.num_evaluations
    self.state.evaluations.assign_add(evaluations - self._counted)
    self._counted = evaluations
    self.stalled += 1
    patience = self.config.reexplore_after
    if patience and self.stalled >= patience:
      self.reexplore()
    finite = times[np.isfinite(times)]
    return float(loss), float(finite.mean()) if len(finite) else np.inf

  def keep_best(self, devices: np.ndarray, step_times: np.ndarray,
                actions=None) -> None:
    """Keeps the fastest feasible row if it beats the best so far, with
    the action that produced it (encoded from the devices if not given)."""
    step_times = np.where(np.isfinite(step_times), step_times, np.inf)
    i = int(np.argmin(step_times))
    if not step_times[i] < self.best_step_time_s:
      return
    self.stalled = 0
    self.state.best_devices.assign(np.asarray(devices[i], np.int32))
    self.state.best_step_time_s.assign(float(step_times[i]))
    sampled = actions is not None and np.array_equal(
        self.env.codec.decode(tf.nest.map_structure(
            lambda a: np.asarray(a)[i:i + 1], actions))[0], devices[i])
    self.best_action = (tf.nest.map_structure(lambda a: np.array(a[i]),
                                              actions) if sampled
                        else self.env.codec.encode(devices[i]))

  def _reward(self, step_time_s: float) -> float:
    return float(rewards(np.array([step_time_s]), self.env.reference_s,
                         self.env.reward_config)[0])

  def summarize(self, loss: float, mean_t: float, rate: float,
                entropy: bool = True) -> None:
    """Writes the curves at the current sample count."""
    step, best = self.samples, self.best_step_time_s
    with self.writer.as_default():
      tf.summary.scalar("loss", loss, step=step)
      tf.summary.scalar("reward/mean", float(self.env.last_rewards.mean()),
                        step=step)
      tf.summary.scalar("reward/best", self._reward(best), step=step)
      tf.summary.scalar("step_time/mean_s", mean_t, step=step)
      tf.summary.scalar("step_time/best_s", best, step=step)
      tf.summary.scalar("samples_per_s", rate, step=step)
      if entropy:
        tf.summary.scalar("entropy", self.entropy(), step=step)

  def entropy(self) -> float:
    """Mean entropy of the collect policy (nats, summed over units)."""
    time_step = tf.nest.map_structure(tf.convert_to_tensor, self.env.reset())
    return float(self._entropy(time_step))

  def _policy_entropy(self, time_step) -> tf.Tensor:
    dist = self.agent.collect_policy.distribution(time_step).action
    return tf.reduce_mean(common.entropy(dist, self.agent.action_spec))

  def save(self, elapsed_s: float) -> None:
    """Records the search's total wall time `elapsed_s`, checkpoints, and
    exports the best placement if it changed."""
    self.state.elapsed_s.assign(elapsed_s)
    with interrupts.writes_allowed():  # The best-so-far survives a Ctrl-C.
      if self.checkpointer is not None:
        self.checkpointer.save(global_step=self.state.samples.numpy())
      self.writer.flush()
      best = self.best_step_time_s
      if self.setup.export_best is not None and best < self._exported:
        self.setup.export_best(self.state.best_devices.numpy(), best)
        self._exported = best

