"""Compiling a learned search's train step only once it pays.

Tracing an agent's train step into a `tf.function` takes as long as up to
~20 eager steps, and a traced step is then 2-10x faster. Measured on 2
cores on k80x4 (seconds per search step; eager: the train step run
eagerly, the policy compiled; trace: the first compiled step):

    graph       placer        agent      eager  trace  compiled  trace/eager
    mlp_2tower  colocrl       reinforce  0.117  1.15   0.015      9.7
    mlp_2tower  colocrl       ppo        0.345  3.52   0.032     10.1
    mlp_2tower  hierarchical  reinforce  0.253  1.26   0.030      4.9
    mlp_2tower  gdp           ppo        0.230  4.13   0.034     17.8
    mlp_2tower  mars          ppo        0.406  6.77   0.058     16.5
    mlp_2tower  placeto       reinforce  0.164  1.23   0.100      6.9
    mlp_2tower  placeto       ppo        0.438  2.60   0.148      5.6
    nmt         colocrl       reinforce  0.529  1.25   0.147      2.1
    nmt         gdp           ppo        0.355  4.59   0.163     12.5
    nmt         mars          ppo        1.222  6.51   0.188      5.2
    nmt         placeto       reinforce  3.738  2.44   2.012      0.1

A search that compiled at once spent a short budget tracing and ended one
(traced) step past it: mars at `budget_s` 3 ran 12.9 s and drew one batch.
So the search starts eagerly and compiles its train step (and the entropy
summary) once the budget left holds at least `COMPILE_AFTER_STEPS` eager
steps (`PROGRESSIVE_COMPILE_AFTER_STEPS` for Placeto's episodes, whose
steps are mostly policy calls and simulations): the trace then fits in
what is left, and the faster steps repay it.
A sample budget that ends sooner keeps the search eager to its end (the
steps are the same computation either way; only their speed differs).
"""

import math
from typing import Callable, Optional

from tf_agents.utils import common

# Eager steps the budget left must hold before the train step is compiled:
# above the largest trace / eager ratio measured (17.8; Placeto's, 6.9).
# Compiling pays once the budget left holds about trace / eager steps, so a
# larger figure wastes short budgets on eager steps.
COMPILE_AFTER_STEPS = 20
PROGRESSIVE_COMPILE_AFTER_STEPS = 10


def compile_pays(step_s: float, time_left_s: float,
                 steps_left: Optional[float] = None,
                 after_steps: int = COMPILE_AFTER_STEPS) -> bool:
  """Whether compiling pays: the budget left holds `after_steps` steps of
  `step_s` seconds, in time and (if given) in steps."""
  steps = time_left_s / step_s if step_s > 0 else math.inf
  if steps_left is not None:
    steps = min(steps, steps_left)
  return steps >= after_steps


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

