"""The flags of the verbs that can start their own TF servers for one run
(measure, calibrate): how many, their cores and their GPUs.

Defined once here (absl rejects a second definition of a flag name) and
adopted as key flags by each verb module. They describe the workers the
way `tfplace cluster up` does (its --workers is --local_workers here), so a
run on workers started for it and one on `cluster up`'s servers see the
same devices.
"""

from absl import flags

from tfplace.errors import TfplaceError

_LOCAL_WORKERS = flags.DEFINE_integer(
    "local_workers", 0, "start this many local TF server processes for the "
    "run and stop them after")
_CORES = flags.DEFINE_integer(
    "cores_per_worker", 1, "with --local_workers: cores pinned per worker")
_WORKER_GPUS = flags.DEFINE_list(
    "worker_gpus", [], "with --local_workers: per worker, the GPU ids it is "
    'given, joined by "+" ("0+1"), or "none"; workers past the last entry '
    "get none")


def requested() -> bool:
  """Whether --local_workers asks for workers of the run's own."""
  return _LOCAL_WORKERS.value != 0


def check() -> None:
  """Raises a TfplaceError for values no worker can be started with, before
  any work."""
  from tfplace.measurement.local_cluster import parse_worker_gpus
  if _LOCAL_WORKERS.value < 0:
    raise TfplaceError("--local_workers must be >= 1")
  if not requested() and (_WORKER_GPUS.value or _CORES.present):
    raise TfplaceError(
        "--cores_per_worker and --worker_gpus describe the workers "
        "--local_workers starts: add --local_workers N, or drop them "
        "(running servers keep what `tfplace cluster up --worker_gpus ...` "
        "gave them; a run in process uses this process's devices)")
  if _CORES.value < 1:
    raise TfplaceError("--cores_per_worker must be >= 1")
  if requested():
    parse_worker_gpus(_WORKER_GPUS.value, _LOCAL_WORKERS.value)


def local_cluster():
  """A `LocalCluster` (not started) of the workers the flags describe
  (`check` them first)."""
  from tfplace.measurement.local_cluster import (LocalCluster,
                                                 parse_worker_gpus)
  return LocalCluster(
      num_workers=_LOCAL_WORKERS.value, cores_per_worker=_CORES.value,
      worker_gpus=parse_worker_gpus(_WORKER_GPUS.value, _LOCAL_WORKERS.value))
