"""Placeto through the shared search loop: learning, masks, resume."""

import tfplace  # noqa: F401  (before TensorFlow)

import os

import numpy as np
import pytest
import tensorflow as tf

from tfplace.rl.agents import AgentConfig
from tfplace.rl.placeto_builder import ProgressiveConfig, placeto_setup
from tfplace.rl.search import SearchConfig, run_search

EAGER = dict(progress=False, use_tf_function=False)  # Tiny: no tracing.


def two_group_setup(problem, **kwargs):
  # Start: both groups on the slow device 0 (20 s); the answer is [1, 1].
  config = ProgressiveConfig(batch_size=16, hidden=8, **kwargs)
  return placeto_setup(problem, np.array([0, 0]), 20.0, config)


def device_1_probability(setup):
  """Probability of device 1 at each step of an episode that follows it."""
  env, probs = setup.env, []
  time_step = env.reset()
  for _ in range(env.num_steps):
    obs = tf.nest.map_structure(tf.constant, time_step.observation)
    dist, _ = setup.actor_net(obs)
    probs.append(float(tf.nn.softmax(dist.logits)[0, 1]))
    time_step = env.step(np.ones(env.batch_size, np.int32))
  return np.array(probs)


@pytest.mark.parametrize("agent, reward_mode", [
    ("reinforce", "intermediate"), ("reinforce", "final"),
    ("ppo", "intermediate")])
def test_two_groups_learned_in_a_few_hundred_samples(two_groups, agent,
                                                     reward_mode):
  setup = two_group_setup(two_groups, reward_mode=reward_mode)
  before = device_1_probability(setup)
  result = run_search(
      setup, AgentConfig(kind=agent, baseline="per_step", lr=0.05,
                         ppo_epochs=2),
      SearchConfig(budget_s=600, max_samples=320, warm_start="baseline",
                   **EAGER), seed=1)
  after = device_1_probability(setup)
  np.testing.assert_allclose(before, 0.5, atol=0.05)  # Uniform at the start.
  # From 0.5 to > 0.65 (runs reach 0.85-0.99, once 0.849 under load: TF's
  # kernels are not bit-reproducible, so the figure varies between runs and
  # machines; the best placement below is the exact check).
  assert np.all(after > 0.65), after
  assert result.best_step_time_s == pytest.approx(2.0)
  assert result.best_devices.tolist() == [1, 1]
  assert 320 <= result.samples < 320 + 2 * 16
  assert result.stopped_by == "max_samples"


def test_masked_device_is_never_chosen(chains):
  seen = []
  simulate = chains.simulator.simulate_batch_start_times

  def recording(devices):
    seen.append(np.array(devices))
    return simulate(devices)

  chains.simulator.simulate_batch_start_times = recording
  start = np.zeros(chains.groups.num_groups, np.int32)
  setup = placeto_setup(chains, start, float(chains.simulate_groups(
      start[None])[0]), ProgressiveConfig(batch_size=8, hidden=8))
  result = run_search(setup, AgentConfig(baseline="per_step", lr=0.1),
                      SearchConfig(budget_s=600, max_samples=200,
                                   warm_start="baseline", **EAGER), seed=0)
  assert result.samples >= 200
  # Device per op of every distinct placement simulated; op 2 has no kernel
  # on device 1. Repeats hit the memo, and how many there are depends on the
  # machine's float rounding (209 here, 149 on CI): ask for a third.
  ops = np.concatenate(seen[1:])
  assert len(ops) >= 64
  assert not np.any(ops[:, 2] == 1)
  assert len(set(ops[:, 3].tolist())) == 3  # Others use every device.


def search(problem, logdir, max_samples, **kwargs):
  config = SearchConfig(budget_s=600, max_samples=max_samples, logdir=logdir,
                        warm_start="baseline", **EAGER, **kwargs)
  return run_search(two_group_setup(problem),
                    AgentConfig(baseline="per_step", lr=0.05), config, seed=0)


def test_resumed_search_continues_its_step_counter(two_groups, tmp_path):
  logdir = str(tmp_path / "run")
  first = search(two_groups, logdir, 64)
  assert first.samples >= 64 and first.train_steps >= 2
  second = search(two_groups, logdir, first.samples + 64, resume=True)
  assert second.resumed and second.samples >= first.samples + 64
  # The counters went on from the first run's, not from 0.
  assert second.train_steps == first.train_steps + len(second.curve)
  assert second.curve[0].samples > first.samples
  assert second.evaluations > first.evaluations
  assert second.best_step_time_s <= first.best_step_time_s
  assert tf.io.gfile.glob(os.path.join(logdir, "summaries", "*"))


def test_imitation_warm_start_stays_near_the_start(chains):
  start = np.zeros(chains.groups.num_groups, np.int32)
  setup = placeto_setup(chains, start, float(chains.simulate_groups(
      start[None])[0]), ProgressiveConfig(batch_size=8, hidden=8))
  result = run_search(setup, AgentConfig(baseline="per_step"), SearchConfig(
      budget_s=600, max_samples=8, explore=1.0, **EAGER), seed=0)
  # About one group of eleven moves per episode: ~8 of 88 steps simulate.
  assert result.evaluations < 40
  assert result.best_step_time_s <= result.start_step_time_s
