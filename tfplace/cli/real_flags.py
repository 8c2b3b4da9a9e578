"""`tfplace place`'s flags for checking the winners on real runs.

--verify_top_k K --target T: after the placer (a search's K best distinct
placements; a heuristic's one and the next best heuristics), every
candidate and the best heuristic are measured on T in --verify_rounds
interleaved rounds of --verify_steps timed steps, and the placement written
is the measured fastest (`tfplace.real.verify`). T is the state file of
`tfplace cluster up`, a TF cluster spec ({"worker": [...]}, inline or a
file), grpc://host:port, or "local" (this process's CPU devices). Place on
the target's own cluster (--cluster the same state file) so that the
simulator knows its measured figures.
"""

import os
import sys
from typing import List

from absl import flags

from tfplace.errors import TfplaceError

_VERIFY_TOP_K = flags.DEFINE_integer(
    "verify_top_k", 0, "measure the placer's K best distinct placements and "
    "the best heuristic on --target, write the measured fastest (0: off)")
_TARGET = flags.DEFINE_string(
    "target", None, "where --verify_top_k measures: a `tfplace cluster up` "
    "state file, a TF cluster spec, grpc://host:port, or local")
_ROUNDS = flags.DEFINE_integer(
    "verify_rounds", 3, "interleaved rounds; each measures every candidate "
    "once")
_STEPS = flags.DEFINE_integer(
    "verify_steps", 5, "timed steps per candidate and round")


def wanted() -> bool:
  """True when the flags ask for real runs."""
  return bool(_VERIFY_TOP_K.value)


def check_flags() -> None:
  """Bad values fail before any work (TfplaceError)."""
  if _TARGET.value and not wanted():
    raise TfplaceError("--target is for --verify_top_k")
  if not wanted():
    return
  if not _TARGET.value:
    raise TfplaceError("--verify_top_k needs --target (a `tfplace cluster "
                       "up` state file, a cluster spec, grpc://host:port or "
                       "local)")
  settings()  # Raises on a bad K, rounds or steps.


def settings():
  """The `VerifySettings` of the flags."""
  from tfplace.measurement.config import MeasureConfig
  from tfplace.real.verify import VerifySettings
  return VerifySettings(
      top_k=_VERIFY_TOP_K.value, rounds=_ROUNDS.value,
      measure=MeasureConfig(warmup=2, steps=_STEPS.value))


def target():
  """What --target names: a RemoteCluster, grpc://... or "local"."""
  value = _TARGET.value
  if value == "local" or value.startswith("grpc://"):
    return value
  from tfplace.cli.run_helpers import servers_from_cluster_arg
  remote, _ = servers_from_cluster_arg(value)
  return remote


def place(graph, cluster, cost_model, placer: str, options, seed):
  """The verified placement (see the module docstring)."""
  from tfplace.real.verify import verify_top_k
  s = settings()
  return verify_top_k(graph, target(), placer, options, top_k=s.top_k,
                      cluster=cluster, cost_model=cost_model, seed=seed,
                      settings=s).placement


def report_lines(placement) -> List[str]:
  """The verification report of `placement`'s metadata, as lines."""
  from tfplace.real.rank_report import VerifyReport
  data = placement.metadata.extra.get("verify")
  return VerifyReport.from_dict(data).describe().splitlines() if data else []


def exit_now_if_tf_busy() -> None:
  """After a worker died during the rounds (the placement is written), TF
  calls to it may wait in background threads until their deadlines: give
  them 2 s, then leave with status 0 at once."""
  from tfplace.measurement.session import wait_for_background
  if wait_for_background(timeout_s=2.0):
    return
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(0)  # pylint: disable=protected-access
