"""The train step runs eagerly until compiling it pays."""

import tfplace  # noqa: F401  (before TensorFlow)

import time

import numpy as np
import tensorflow as tf

from tfplace.rl import builders
from tfplace.rl.agents import AgentConfig
from tfplace.rl.deferred_compile import (COMPILE_AFTER_STEPS, DeferredFunction,
                                         compile_pays)
from tfplace.rl.search import SearchConfig, run_search, train_step
from tfplace.rl.search_loop import SearchLoop


def test_compiling_pays_when_the_budget_left_holds_enough_steps():
  assert COMPILE_AFTER_STEPS == 20
  assert compile_pays(step_s=0.1, time_left_s=2.0)  # 20 steps left.
  assert not compile_pays(step_s=0.1, time_left_s=1.9)  # 19.
  assert not compile_pays(step_s=0.5, time_left_s=9.0)  # Mars at 10 s: 18.
  assert not compile_pays(step_s=0.1, time_left_s=300.0, steps_left=2)
  assert compile_pays(step_s=0.1, time_left_s=300.0, steps_left=20)
  assert not compile_pays(step_s=0.1, time_left_s=-1.0)
  # Placeto's steps: 2 s eager on NMT, ~1 s more to trace.
  assert not compile_pays(step_s=2.0, time_left_s=19.0, after_steps=10)
  assert compile_pays(step_s=2.0, time_left_s=20.0, after_steps=10)


def test_deferred_function_is_eager_until_compiled():
  f = DeferredFunction(lambda: tf.constant(tf.executing_eagerly()))
  assert bool(f()) and not f.compiled
  f.compile()
  assert not bool(f()) and f.compiled  # Traced: not eager inside.


def loop_of(problem, **config):
  setup = builders.colocrl_setup(problem, np.array([0, 0]), 20.0,
                                 builders.EnvConfig(batch_size=32, hidden=8))
  loop = SearchLoop(setup, AgentConfig(lr=0.1),
                    SearchConfig(progress=False, **config))
  loop.start()
  return loop


def test_a_search_compiles_only_when_its_budget_repays_it(two_groups):
  # Mars at budget_s 3 compiled its train step at once, spent 12.9 s
  # tracing it and drew one batch.
  t0 = time.time()
  for config, compiled in (
      (dict(budget_s=600, max_samples=100_000), True),
      (dict(budget_s=600, max_samples=64), False),  # 1 step left.
      (dict(budget_s=600, max_samples=100_000, use_tf_function=False),
       False)):
    loop = loop_of(two_groups, **config)
    train_step(loop, [], 0, 0.0, t0)
    assert not loop.compiled or compiled  # Eager through the first step.
    train_step(loop, [], 0, 0.0, t0)
    assert loop.compiled == compiled, config


def test_a_budget_spent_before_the_search_starts_draws_nothing(two_groups):
  # The budget counts from the placer's start (networks built, pre-trained):
  # spent there, the search returns the start placement at once.
  setup = builders.colocrl_setup(two_groups, np.array([0, 0]), 20.0,
                                 builders.EnvConfig(batch_size=32, hidden=8))
  result = run_search(setup, AgentConfig(), SearchConfig(
      budget_s=5, progress=False), seed=0, started_at=time.time() - 6)
  assert (result.samples, result.train_steps) == (0, 0)
  assert result.stopped_by == "time_s" and result.wall_time_s >= 6
  assert result.best_devices.tolist() == [0, 0]
