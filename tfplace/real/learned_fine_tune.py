"""A learned placer's simulator-trained policy, fine-tuned on measured steps.

DOPPLER's staging (imitate a heuristic → RL on a simulator → RL on the real
system; ICLR 2026), last stage: the learned placer's checkpoint (its
`logdir`, written by its search on the simulator) is copied to
`<logdir>/real` (the simulator-trained one stays as it is) and resumed there
with the same networks; the environment's evaluator is now the
`MeasuredEvaluator` (the learned search's `fine_tune` mode: the restored
best is measured again, the budget counts from now), in batches of
`RealRewardSettings.batch_size` placements. The rewards keep their
reference: the start placement the policy was trained from, now measured.

For the one-shot learned placers (colocrl, hierarchical); Placeto's
observations are the simulator's schedule, which a real run does not give.
"""

import dataclasses
import os
import shutil
from typing import Tuple

import numpy as np

from tfplace.errors import PlacementError
from tfplace.placers.learned_common import env_config, search_config
from tfplace.placers.search_support import start_placement

# The learned placers whose policy can be fine-tuned on measured times.
SUPPORTED = ("colocrl", "hierarchical")
REAL_DIR = "real"


class MeasuredProblem:
  """A placement problem whose `simulate_groups` measures (the learned
  placers' builders read the rest of the problem as it is)."""

  def __init__(self, problem, evaluator):
    self._problem, self.simulate_groups = problem, evaluator

  def __getattr__(self, name):
    return getattr(self._problem, name)


def check_learned(placer) -> None:
  """Raises PlacementError unless `placer` can be fine-tuned (a supported
  learned placer with a `logdir` to hold its simulator-trained policy)."""
  if placer.name not in SUPPORTED:
    raise PlacementError(
        f"--real_reward fine-tunes the learned placers {', '.join(SUPPORTED)}"
        f" (and the search placers); {placer.name}'s observations need the "
        "simulator")
  if not placer.options.logdir:
    raise PlacementError(
        f"--real_reward with {placer.name} fine-tunes its simulator-trained "
        "policy: give it a logdir (--logdir DIR) to keep the checkpoint in")


def learned_search(problem, placer, evaluator, budget_s: float, settings,
                   seed) -> Tuple[np.ndarray, dict]:
  """Resumes `placer`'s checkpoint on measured times (see the docstring).

  Returns:
    (the best placement found, int32 [G]; the search's summary without its
    curve).
  """
  from tfplace.rl.search import run_search
  check_learned(placer)
  options = placer.options
  logdir = _fresh_copy(options.logdir)
  start = start_placement(problem, options.init, seed)
  measured_s = float(evaluator(start.group_devices[None])[0])
  start = dataclasses.replace(start, step_time_s=measured_s)
  env = dataclasses.replace(env_config(options),
                            batch_size=settings.batch_size)
  setup = placer.setup(MeasuredProblem(problem, evaluator), start, env)
  config = dataclasses.replace(
      search_config(options), budget_s=budget_s, logdir=logdir, resume=True,
      restart=False, fine_tune=True, progress=settings.progress)
  result = run_search(setup, placer.agent_config(), config, seed)
  summary = dict(result.summary(start), algorithm=f"{placer.name} policy")
  summary.pop("curve", None)
  return result.best_devices, summary


def _fresh_copy(logdir: str) -> str:
  """`<logdir>/real`, a fresh copy of the checkpoint in `logdir`."""
  from tfplace.rl.search_state import CHECKPOINT_DIR, SIGNATURE_FILE
  source = os.path.join(logdir, CHECKPOINT_DIR)
  if not os.path.isdir(source):
    raise PlacementError(f"no simulator-trained checkpoint in {logdir} (run "
                         "the learned placer with this logdir first)")
  real = os.path.join(logdir, REAL_DIR)
  shutil.rmtree(real, ignore_errors=True)
  shutil.copytree(source, os.path.join(real, CHECKPOINT_DIR))
  shutil.copy(os.path.join(logdir, SIGNATURE_FILE), real)
  return real
