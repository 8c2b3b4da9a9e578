"""Compiling a learned search's train step only once it pays.

Tracing an agent's train step into a `tf.function` takes as long as 5-20
eager steps, and a traced step is then 2-10x faster. Measured on 2 cores
with mlp_2tower on k80x4 (seconds per search step; eager: the train step
run eagerly, the policy compiled; trace: the first compiled step):

    placer        agent      eager   trace   compiled   trace / eager
    colocrl       reinforce  0.117   1.15    0.015      9.7
    colocrl       ppo        0.345   3.52    0.032      10.1
    hierarchical  reinforce  0.253   1.26    0.030      4.9
    placeto       ppo        0.438   2.60    0.148      5.6
    gdp           ppo        0.230   4.13    0.034      17.8
    mars          ppo        0.406   6.77    0.058      16.5

A search that compiled at once spent a short budget tracing and ended one
(traced) step past it: mars at `budget_s` 3 ran 12.9 s and drew one batch.
So the search starts eagerly and compiles its train step (and the entropy
summary) once the budget left holds at least `COMPILE_AFTER_STEPS` eager
steps: the trace then fits in what is left, and the faster steps repay it.
A sample budget that ends sooner keeps the search eager to its end (the
steps are the same computation either way; only their speed differs).
"""

import math
from typing import Callable, Optional

from tf_agents.utils import common

# Eager steps the budget left must hold before the train step is compiled
# (1.5x the largest trace / eager ratio measured).
COMPILE_AFTER_STEPS = 30


def compile_pays(step_s: float, time_left_s: float,
                 steps_left: Optional[float] = None) -> bool:
  """Whether compiling pays: the budget left holds `COMPILE_AFTER_STEPS`
  steps of `step_s` seconds, in time and (if given) in steps."""
  steps = time_left_s / step_s if step_s > 0 else math.inf
  if steps_left is not None:
    steps = min(steps, steps_left)
  return steps >= COMPILE_AFTER_STEPS


class DeferredFunction:
  """A function run eagerly until `compile` makes it a `tf.function`."""

  def __init__(self, fn: Callable):
    self._fn = fn
    self._compiled: Optional[Callable] = None

  @property
  def compiled(self) -> bool:
    return self._compiled is not None

  def compile(self) -> None:
    """Later calls run the `tf.function` (the first one traces it)."""
    if self._compiled is None:
      self._compiled = common.function(self._fn)

  def __call__(self, *args, **kwargs):
    return (self._compiled or self._fn)(*args, **kwargs)

