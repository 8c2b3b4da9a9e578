"""Measure a few placements in interleaved rounds, so that drift cancels.

On a shared machine the speed of the same placement moves from minute to
minute (other processes, clocks, caches). Measuring A's ten steps, then B's,
then C's puts that drift into the comparison. Here every round measures
every placement once (fewer timed steps each), in a rotated order that is
reversed every other round, and the comparison is made within a round: a
placement's figure is the median over rounds of its round median divided by
a reference placement's round median (`InterleavedTimes.ratio_to`).

A placement that fails in a round is a failed sample: its message is kept
(`errors`) and the others go on. A dead worker (a `WorkerDiedError`, or any
failure after which a worker is found dead) stops the measurement cleanly
after naming it: what was measured before is kept (`stopped` says why).
So does Ctrl-C (it is recorded: `tfplace.interrupts.interrupted()`), so that
the caller can keep the best measured so far.
"""

import dataclasses
import math
from typing import Optional, Sequence, Tuple

import numpy as np
from absl import logging
from tqdm.auto import tqdm

from tfplace import interrupts
from tfplace.graph.op_graph import OpGraph
from tfplace.measurement.batch import measure_batch, round_order
from tfplace.measurement.config import MeasureConfig
from tfplace.measurement.feeds import resolve_inputs
from tfplace.placement import Placement
from tfplace.real.target import Target


@dataclasses.dataclass(frozen=True)
class InterleavedTimes:
  """Round medians of several placements.

  Attributes:
    round_medians_s: float [P, R], the median timed step of each placement
      in each round (nan: failed or not measured).
    errors: per placement, the failure message of each failed round.
    stopped: why the measurement stopped before its last round (None: it
      did not).
  """
  round_medians_s: np.ndarray
  errors: Tuple[Tuple[str, ...], ...]
  stopped: Optional[str] = None

  @property
  def measured_s(self) -> np.ndarray:
    """float [P]: the median over rounds (nan where none succeeded)."""
    return np.array([_nanmedian(row) for row in self.round_medians_s])

  @property
  def ok(self) -> np.ndarray:
    """bool [P]: measured in at least one round."""
    return np.isfinite(self.round_medians_s).any(axis=1)

  def ratio_to(self, reference: int) -> np.ndarray:
    """float [P]: median over rounds of time / the reference's time in the
    same round (nan where no round has both)."""
    ref = self.round_medians_s[reference]
    return np.array([_nanmedian(row / ref) for row in self.round_medians_s])


def _nanmedian(values: np.ndarray) -> float:
  values = values[np.isfinite(values)]
  return float(np.median(values)) if len(values) else math.nan


def measure_interleaved(graph: OpGraph, placements: Sequence[Placement],
                        target: Target, rounds: int = 3,
                        config: Optional[MeasureConfig] = None, *,
                        feeds=None, feed_options=None, progress: bool = True,
                        desc: str = "measure") -> InterleavedTimes:
  """Measures every placement once per round (see the module docstring).

  Args:
    graph: the training step.
    placements: the placements (P of them).
    target: where to run them.
    rounds: rounds (R).
    config: warmup and timed steps per placement and round; its target is
      replaced by `target`'s.
    feeds, feed_options: the graph's inputs (see `tfplace.measure`).
    progress: show a tqdm bar.
    desc: the bar's label.
  """
  config = target.measure_config(config)
  inputs = resolve_inputs(graph, feeds, feed_options)
  medians = np.full((len(placements), rounds), np.nan)
  errors = [[] for _ in placements]
  bar = tqdm(total=rounds * len(placements), desc=desc, unit="run",
             disable=not progress, leave=False)
  stopped, r = None, 0
  try:
    for r in range(rounds):
      stopped = _one_round(graph, placements, config, inputs, target, r,
                           medians, errors, bar)
      if stopped:
        break
  except KeyboardInterrupt:
    interrupts.note_interrupt()
    stopped = (f"interrupted (Ctrl-C) in round {r + 1}; measuring stopped, "
               "what was measured is kept")
  finally:
    bar.close()
  return InterleavedTimes(medians, tuple(tuple(e) for e in errors), stopped)


def _one_round(graph, placements, config, inputs, target: Target, r: int,
               medians: np.ndarray, errors: list, bar) -> Optional[str]:
  """Measures round `r`; returns why to stop (a dead worker), or None."""
  for i in round_order(len(placements), r):
    outcome = measure_batch(graph, [placements[i]], config, progress=False,
                            feeds=inputs)[0]
    bar.update(1)
    if outcome.ok:
      medians[i, r] = outcome.timing.median_step_time_s
      continue
    errors[i].append(outcome.error)
    logging.warning("round %d: placement %d failed: %s", r + 1, i,
                    outcome.error)
    dead = target.dead_workers()
    if dead:
      return (f"{'; '.join(map(str, dead))}: the worker died in round "
              f"{r + 1}; measuring stopped, what was measured is kept")
  return None
