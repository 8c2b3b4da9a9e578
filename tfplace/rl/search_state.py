"""What a learned search checkpoints, and how it resumes.

A search's log directory holds:

  * ``search.json``: the signature of the problem (graph fingerprint,
    cluster devices, unit and action shapes, placer and agent). Written
    first; a resume whose signature differs is refused with a message that
    says what differs (or starts fresh when asked: `restart`).
  * ``checkpoints/``: tf-agents `Checkpointer` files (`tf.train.Checkpoint`):
    the agent (networks, optimizer, train step), the reward statistics, and
    the `SearchState` (samples, evaluations, elapsed time, best-so-far).
  * ``summaries/``: TensorBoard curves.

Rules: without `resume`, a directory that already holds a checkpoint is an
error (nothing is overwritten); with `resume` and no checkpoint the search
starts fresh; a checkpoint that cannot be read is an error unless `restart`.
"""

import json
import os
import shutil
from typing import Dict, Optional, Tuple

import numpy as np
import tensorflow as tf
from absl import logging
from tf_agents.utils import common

from tfplace.errors import PlacementError
from tfplace.io_utils import atomic_write

SIGNATURE_FILE = "search.json"
CHECKPOINT_DIR = "checkpoints"


class SearchState(tf.Module):
  """Counters and the best-so-far placement, as checkpointed variables."""

  def __init__(self, num_groups: int, name: str = "search_state"):
    super().__init__(name=name)
    self.samples = tf.Variable(0, dtype=tf.int64, name="samples")
    self.evaluations = tf.Variable(0, dtype=tf.int64, name="evaluations")
    self.elapsed_s = tf.Variable(0.0, dtype=tf.float64, name="elapsed_s")
    self.best_step_time_s = tf.Variable(np.inf, dtype=tf.float64,
                                        name="best_step_time_s")
    self.best_devices = tf.Variable(np.zeros(num_groups, np.int32),
                                    name="best_devices")


def _read_signature(path: str) -> Optional[Dict[str, object]]:
  if not os.path.exists(path):
    return None
  try:
    with open(path) as f:
      return json.load(f)
  except (OSError, json.JSONDecodeError, UnicodeDecodeError):
    return {"unreadable": path}


# Signature keys added after checkpoints were first written: a checkpoint
# without one is taken to match (its reader still refuses other shapes).
ADDED_KEYS = ("hidden", "agent")


def _same_problem(old: Optional[Dict[str, object]],
                  new: Dict[str, object]) -> bool:
  if old is None:
    return False
  added = [k for k in ADDED_KEYS if k not in old]
  return old == {k: v for k, v in new.items() if k not in added}


def _differences(old: Dict[str, object], new: Dict[str, object]) -> str:
  keys = sorted(set(old) | set(new))
  return "; ".join(f"{k}: checkpoint {old.get(k)!r}, now {new.get(k)!r}"
                   for k in keys if old.get(k) != new.get(k))


def has_checkpoint(logdir: Optional[str]) -> bool:
  """Whether `logdir` holds a search checkpoint (what `resume` restores)."""
  return bool(logdir) and tf.train.latest_checkpoint(
      os.path.join(logdir, CHECKPOINT_DIR)) is not None


def open_checkpointer(logdir: str, signature: Dict[str, object], resume: bool,
                      restart: bool, **objects
                      ) -> Tuple[common.Checkpointer, Optional[object]]:
  """The checkpointer of `logdir`, restored when resuming (see the rules),
  and the restore's status (`tf.train.Checkpoint.restore`'s; None when
  nothing was restored).

  Args:
    logdir: the search's log directory.
    signature: the problem's signature (JSON-serializable dict).
    resume: continue the checkpoint in `logdir` if there is one.
    restart: discard an incompatible or unreadable checkpoint.
    **objects: trackables to checkpoint (agent, state, ...).

  Raises:
    PlacementError: a checkpoint exists and `resume` is off; the checkpoint
      is for another problem or cannot be read (unless `restart`).
  """
  ckpt_dir = os.path.join(logdir, CHECKPOINT_DIR)
  exists = has_checkpoint(logdir)
  sig_path = os.path.join(logdir, SIGNATURE_FILE)
  signature = json.loads(json.dumps(signature))
  if exists and not resume and not restart:
    raise PlacementError(
        f"{logdir} already holds a search checkpoint: resume it (--resume) "
        f"or choose another --logdir")
  if resume and not exists:
    logging.warning("%s holds no search checkpoint to resume: the search "
                    "starts fresh", logdir)
  old = _read_signature(sig_path)
  same = _same_problem(old, signature)
  if exists and resume and not same and not restart:
    raise PlacementError(
        f"the checkpoint in {logdir} is for another problem ("
        f"{_differences(old or {}, signature)}); use another --logdir, or "
        f"discard it with the option restart=true (--placer_options "
        f"restart=true)")
  if restart and (exists or old is not None) and (not same or not resume):
    logging.warning("discarding the checkpoint in %s (restart)", logdir)
    shutil.rmtree(ckpt_dir, ignore_errors=True)
  atomic_write(sig_path, json.dumps(signature, indent=1, sort_keys=True))
  try:
    checkpointer = common.Checkpointer(ckpt_dir, max_to_keep=2, **objects)
    status = checkpointer.initialize_or_restore()
    status = status if checkpointer.checkpoint_exists else None
  except (tf.errors.OpError, ValueError, AssertionError, IndexError,
          KeyError, TypeError) as e:
    if not restart:
      raise PlacementError(
          f"cannot read the checkpoint in {ckpt_dir} ({type(e).__name__}: "
          f"{str(e).splitlines()[0][:200]}); discard it with the option "
          f"restart=true (--placer_options restart=true)") from None
    logging.warning("discarding the unreadable checkpoint in %s", ckpt_dir)
    shutil.rmtree(ckpt_dir, ignore_errors=True)
    checkpointer, status = common.Checkpointer(ckpt_dir, max_to_keep=2,
                                               **objects), None
  return checkpointer, status
