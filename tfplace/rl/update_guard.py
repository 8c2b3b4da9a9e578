"""Undoing a train step that leaves a weight non-finite.

A policy-gradient step can leave a weight NaN or infinite. Seen once: a gdp
search with PPO on RNNLM, after ~900 train steps; every sample after it put
every unit on a device that does not exist (`tf.random.categorical` returns
the number of classes for NaN logits) and the search ended on the
simulator's error. One such step ruins the policy for good, since Adam's
moments keep the NaN. `GuardedTrain` copies the networks' weights and the
optimizer's state before each step and puts them back when the step leaves
any of them (or the loss) non-finite, or stops on a non-finite loss itself
(tf-agents' REINFORCE checks its loss, PPO does not): the batch is skipped,
counted and logged, and the search goes on from the weights before it.
"""

from typing import Callable, List, Sequence

import numpy as np
import tensorflow as tf
from absl import logging
from tf_agents.agents.tf_agent import LossInfo


def _built_variables(module) -> List[tf.Variable]:
  """A network's or optimizer's variables; none for an unbuilt network."""
  if module is None or not getattr(module, "built", True):
    return []
  return list(module.variables)


class GuardedTrain:
  """`train(experience)` that undoes a step leaving anything non-finite."""

  def __init__(self, train: Callable, modules: Sequence[object]):
    """Args:
      train: the agent's train function (returns a `LossInfo`).
      modules: the networks and the optimizer whose variables it changes
        (read at each call: the optimizer builds its state at the first).
    """
    self._train = train
    self._modules = list(modules)
    self.skipped = 0

  def _variables(self) -> List[tf.Variable]:
    return [v for m in self._modules for v in _built_variables(m)]

  def __call__(self, experience):
    """The train step's `LossInfo` (its loss non-finite if undone)."""
    saved = {v.ref(): v.numpy() for v in self._variables()}
    try:
      info = self._train(experience)
      loss = float(info.loss)
    except tf.errors.InvalidArgumentError as e:
      if "inf or nan" not in str(e):
        raise
      info, loss = None, float("nan")
    after = self._variables()
    if np.isfinite(loss) and all(np.isfinite(v.numpy()).all() for v in after):
      return info
    for variable in after:
      if variable.ref() in saved:
        variable.assign(saved[variable.ref()])
      elif not np.isfinite(variable.numpy()).all():  # Built by this step.
        variable.assign(tf.zeros_like(variable))
    self.skipped += 1
    logging.warning("a train step left the policy non-finite (loss %s): "
                    "undone, its batch skipped (%d so far)", loss,
                    self.skipped)
    return LossInfo(loss=tf.constant(loss), extra=())
