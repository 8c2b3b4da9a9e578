"""`tfplace place`'s flags for checking the winners on real runs.

--verify_top_k K --target T: after the placer (a search's K best distinct
placements; a heuristic's one and the next best heuristics), every
candidate and the best heuristic are measured on T in --verify_rounds
interleaved rounds of --verify_steps timed steps, and the placement written
is the measured fastest (`tfplace.real.verify`). T is where the steps run:
TF servers, as the state file of `tfplace cluster up`, a TF cluster spec
({"worker": [...]}, inline or a file) or grpc://host:port (place on the
servers' own cluster: --cluster the same state file, so that the simulator
knows their measured figures); or "local", this process itself, which runs
the devices the cluster names under /job:localhost/replica:0/task:0 (CPU:i
as logical CPUs sharing its cores, GPU:i this machine's GPUs): place on
--cluster local:N (N logical CPUs), local or a cluster JSON of such
devices. A cluster of servers' devices with --target local is refused,
naming what to give instead; a cluster of one device, where every
placement is the same, is warned of.

--real_reward (with --target): then fine-tunes the placement on measured
step times for --real_budget_s seconds (`tfplace.real.fine_tune`: a
--real_algorithm search whose evaluator measures each batch between two
runs of the start placement; failures are a penalty; a placement measured
faster than the best so far is first confirmed against it in
--real_confirm_rounds fresh pairs) and writes the result only if it beats
the start in a duel of fresh rounds.
"""

import os
import sys
from typing import List

from absl import flags, logging

from tfplace.errors import TfplaceError
from tfplace.placers.search_support import KEEP_TOP

# The most candidates a verification keeps.
MAX_TOP_K = KEEP_TOP

_VERIFY_TOP_K = flags.DEFINE_integer(
    "verify_top_k", 0, "measure the placer's K best distinct placements and "
    "the best heuristic on --target, write the measured fastest (0: off)",
    lower_bound=0, upper_bound=MAX_TOP_K)
_TARGET = flags.DEFINE_string(
    "target", None, "where --verify_top_k and --real_reward run the steps: "
    "TF servers (a `tfplace cluster up` state file or a TF cluster spec, as "
    "given to --cluster; grpc://host:port), or local: this process, on the "
    "/job:localhost devices of --cluster (e.g. --cluster local:2, two "
    "logical CPUs)")
_ROUNDS = flags.DEFINE_integer(
    "verify_rounds", 3, "interleaved rounds; each measures every candidate "
    "once", lower_bound=1)
_STEPS = flags.DEFINE_integer(
    "verify_steps", 5, "timed steps per candidate and round", lower_bound=1)
_REAL_REWARD = flags.DEFINE_bool(
    "real_reward", False, "fine-tune the placement on measured step times "
    "on --target")
_REAL_BUDGET_S = flags.DEFINE_float(
    "real_budget_s", 300.0, "--real_reward: real seconds for the fine-tune")
_REAL_ALGORITHM = flags.DEFINE_enum(
    "real_algorithm", "local_search", ["local_search", "cross_entropy"],
    "--real_reward: the search on measured times")
_REAL_CONFIRM = flags.DEFINE_integer(
    "real_confirm_rounds", 2, "--real_reward: fresh pairs that confirm a "
    "placement measured faster than the search's best so far (0: none)",
    lower_bound=0)
flags.register_validator("real_budget_s", lambda seconds: seconds > 0,
                         message="--real_budget_s must be > 0 seconds")


def wanted() -> bool:
  """True when the flags ask for real runs."""
  return bool(_VERIFY_TOP_K.value) or _REAL_REWARD.value


def check_flags() -> None:
  """Bad values fail before any work (TfplaceError)."""
  if _TARGET.value and not wanted():
    raise TfplaceError("--target is for --verify_top_k and --real_reward")
  if not wanted():
    return
  if not _TARGET.value:
    raise TfplaceError("--verify_top_k and --real_reward need --target (a "
                       "`tfplace cluster up` state file, a cluster spec, "
                       "grpc://host:port or local)")
  if _VERIFY_TOP_K.value:
    settings()  # Raises on a bad K, rounds or steps.
  if _REAL_REWARD.value:
    real_settings()


def real_settings():
  """The `RealRewardSettings` of the flags."""
  from tfplace.real.fine_tune import RealRewardSettings
  from tfplace.real.measured_evaluator import MeasuredSettings
  return RealRewardSettings(
      budget_s=_REAL_BUDGET_S.value, algorithm=_REAL_ALGORITHM.value,
      measured=MeasuredSettings(confirm_rounds=_REAL_CONFIRM.value))


def settings():
  """The `VerifySettings` of the flags."""
  from tfplace.measurement.config import MeasureConfig
  from tfplace.real.verify import VerifySettings
  return VerifySettings(
      top_k=_VERIFY_TOP_K.value, rounds=_ROUNDS.value,
      measure=MeasureConfig(warmup=2, steps=_STEPS.value))


def target():
  """What --target names: a RemoteCluster, grpc://... or "local". Its
  servers' tasks are checked by `place_on_target` (`checked_problem`)."""
  value = _TARGET.value
  if value == "local" or value.startswith("grpc://"):
    return value
  from tfplace.cli.run_helpers import servers_from_cluster_arg
  remote, _ = servers_from_cluster_arg(
      value, "--target", ", grpc://host:port or local", check_tasks=False)
  return remote


def place(graph, cluster, cost_model, placer: str, options, seed):
  """The verified and/or fine-tuned placement (see the module docstring)."""
  from tfplace.cli.run_helpers import native_stdout_to_stderr
  from tfplace.real import api
  verify = settings() if _VERIFY_TOP_K.value else None
  real = real_settings() if _REAL_REWARD.value else None
  if cluster.num_devices == 1:
    logging.warning(
        "--cluster %s has one device: every placement is the same one, so "
        "the real runs compare nothing%s", cluster.name,
        "; --cluster local:N gives this process N logical CPUs"
        if _TARGET.value == "local" else "")
  with native_stdout_to_stderr():  # TF's C++ lines stay off stdout
    return api.place_on_target(graph, target(), placer, options,
                               cluster=cluster, cost_model=cost_model,
                               seed=seed, verify=verify, real_reward=real)


def report_lines(placement) -> List[str]:
  """The verification report and the fine-tune of `placement`'s metadata,
  as lines."""
  from tfplace.real.fine_tune import describe_summary
  from tfplace.real.rank_report import VerifyReport
  extra = placement.metadata.extra
  lines = []
  if extra.get("verify"):
    lines += VerifyReport.from_dict(extra["verify"]).describe().splitlines()
  if extra.get("real_reward"):
    lines.append(describe_summary(extra["real_reward"]))
  return lines


def exit_now_if_tf_busy() -> None:
  """After a worker died during the rounds (the placement is written), TF
  calls to it may wait in background threads until their deadlines: give
  them 2 s, then leave at once (status 0, or 130 after Ctrl-C)."""
  from tfplace import interrupts
  from tfplace.measurement.session import wait_for_background
  if wait_for_background(timeout_s=2.0):
    return
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(130 if interrupts.interrupted() else 0)  # pylint: disable=protected-access
