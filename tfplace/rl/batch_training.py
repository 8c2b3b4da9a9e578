"""GDP's batch training: one policy learns to place several graphs at once.

GDP (Zhou et al., 2019) trains one policy on a set of graphs at once (its
"batch training"; parameter superposition lets the shared weights serve each
graph), then places graphs it never saw, at once or after a short fine-tune.
Here each graph keeps its own `SearchLoop` (environment, reward statistics,
per-unit biases, imitation warm start, best-so-far, checkpoint), and their
networks share every graph-independent weight (`GDPNetwork(
share_weights_with=...)`) and one Adam optimizer. The loops take train steps
in turn, one graph's batch per step: the sequential form of GDP's step over
a batch drawn from every graph.

The budget is the wall time of the whole training (`SearchConfig.budget_s`;
`max_samples` counts per graph), checked after each round of steps, so every
graph takes as many. Each graph's checkpoint, curves and best placement go
under `<logdir>/graphs/<name>/`, all saved at once, so resuming continues
every graph from the same shared weights. Ctrl-C stops the training with
every graph's best placement so far.
"""

import contextlib
import dataclasses
import os
import re
import time
from typing import Dict, List, Mapping, Optional

import numpy as np
import tensorflow as tf

from tfplace.errors import PlacementError
from tfplace.placers.search_support import Budget, SearchRun
from tfplace.rl import agents as agents_lib
from tfplace.rl.search import (CurvePoint, LearnedResult, LearnedSetup,
                               SearchConfig, learned_result,
                               note_spent_resume, stop_reason, train_step)
from tfplace.rl.search_loop import SearchLoop

GRAPHS_DIR = "graphs"
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def graph_logdir(logdir: Optional[str], name: str) -> Optional[str]:
  """Where graph `name`'s checkpoint, curves and best placement go."""
  return os.path.join(logdir, GRAPHS_DIR, name) if logdir else None


def check_graph_names(names) -> None:
  """Raises PlacementError unless there are two or more names, each usable
  as a directory name."""
  names = list(names)
  if len(names) < 2:
    raise PlacementError(f"batch training needs two or more graphs, got "
                         f"{len(names)}")
  bad = [n for n in names if not _NAME.match(n) or n in (".", "..")]
  if bad:
    raise PlacementError(f"graph names must be letters, digits, '_', '-' or "
                         f"'.', got {bad}")


def run_batch_training(setups: Mapping[str, LearnedSetup], agent_config,
                       config: SearchConfig, seed: Optional[int] = None,
                       started_at: Optional[float] = None
                       ) -> Dict[str, LearnedResult]:
  """Trains one policy on every graph of `setups` (see the module
  docstring).

  Args:
    setups: graph name -> its `LearnedSetup`; their actor networks share
      their graph-independent weights.
    agent_config: a `tfplace.rl.agents.AgentConfig` (one for all graphs).
    config: budgets, warm start, logdir (the root of the graphs' logdirs).
    seed: seeds TensorFlow's and NumPy's random generators.
    started_at: the `time.time()` at which the time budget started (before
      the networks were built); None: now.

  Returns:
    graph name -> its `LearnedResult` (the whole training's wall time and
    stop reason; its own samples, evaluations, train steps and curve).
  """
  check_graph_names(setups)
  if seed is not None:
    tf.random.set_seed(seed)
    np.random.seed(seed)
  t0 = time.time() if started_at is None else started_at
  with tf.device("/CPU:0"):
    optimizer = _shared_optimizer(setups.values(), agent_config)
    loops = {name: SearchLoop(setup, agent_config, dataclasses.replace(
        config, logdir=graph_logdir(config.logdir, name)), optimizer)
             for name, setup in setups.items()}
    starts = {name: loop.start() for name, loop in loops.items()}
    return _train(loops, starts, config, t0)


def _shared_optimizer(setups, agent_config):
  """One optimizer built for every network's variables (Keras's optimizer
  refuses variables it was not built with, and each loop trains a part)."""
  variables = {}
  for setup in setups:
    for net in (setup.actor_net, setup.value_net):
      net.create_variables()
      variables.update((v.ref(), v) for v in net.trainable_variables)
  optimizer = agents_lib.make_optimizer(agent_config)
  optimizer.build(list(variables.values()))
  return optimizer


def _train(loops: Dict[str, SearchLoop], starts, config: SearchConfig,
           t0: float) -> Dict[str, LearnedResult]:
  """The loops' steps in turn until the budget is spent or Ctrl-C."""
  spent_before_s = max(loop.spent_before_s for loop in loops.values())
  before_s = max(float(loop.state.elapsed_s.numpy())
                 for loop in loops.values())
  curves: Dict[str, List[CurvePoint]] = {name: [] for name in loops}
  first = {name: loop.samples for name, loop in loops.items()}
  stopped = _stop(loops, spent_before_s + time.time() - t0)
  with contextlib.ExitStack() as stack:
    runs = {name: _search_run(stack, loop, starts[name], config,
                              spent_before_s, name)
            for name, loop in loops.items()}
    last_save = time.time()
    while stopped is None:
      for name, loop in loops.items():
        train_step(loop, curves[name], first[name], before_s, t0,
                   share=1 / len(loops))
        if any(r.interrupted for r in runs.values()):
          stopped = "interrupted"
        elif any(r.stop_reason for r in runs.values()):
          stopped = "stopped"
        if stopped is not None:
          break
      else:  # Budgets after whole rounds: every graph as many steps.
        stopped = _stop(loops, spent_before_s + time.time() - t0)
        if stopped is None and time.time() - last_save >= (
            config.checkpoint_every_s):
          _save(loops, before_s + time.time() - t0)
          last_save = time.time()
  if any(curves.values()) or not all(loop.resumed
                                     for loop in loops.values()):
    _save(loops, before_s + time.time() - t0)
  else:  # A resumed training whose budget was already spent keeps its
    # checkpoints as they were (as `tfplace.rl.search` does).
    note_spent_resume(list(loops.values()), stopped)
  return {name: learned_result(loop, stopped, curves[name])
          for name, loop in loops.items()}


def _search_run(stack: contextlib.ExitStack, loop: SearchLoop, start,
                config: SearchConfig, spent_before_s: float,
                name: str) -> SearchRun:
  """A `SearchRun` (best-so-far, progress bar, Ctrl-C) around `loop`'s
  evaluator, entered on `stack`, which also puts the evaluator back."""
  evaluator = loop.env.evaluator
  run = stack.enter_context(SearchRun(
      evaluator.simulate,
      Budget(seconds=max(config.budget_s - spent_before_s, 1e-3)), *start,
      desc=f"batch training: {name}", progress=config.progress))
  stack.callback(setattr, evaluator, "simulate", evaluator.simulate)
  evaluator.simulate = run.evaluate
  return run


def _stop(loops: Dict[str, SearchLoop], elapsed_s: float) -> Optional[str]:
  """The time budget (shared) or the graphs' sample budget (each graph
  draws as many samples)."""
  for loop in loops.values():
    reason = stop_reason(loop, elapsed_s, loop.samples_before)
    if reason is not None:
      return reason
  return None


def _save(loops: Dict[str, SearchLoop], elapsed_s: float) -> None:
  """Checkpoints every graph at once (the shared weights agree)."""
  for loop in loops.values():
    loop.save(elapsed_s)
