"""How a placement is measured: one frozen config for every real-run entry.

`measure`, `measure_batch`, the comm benchmark, the calibration runs, the
fidelity experiment, the `measure`/`calibrate` CLI verbs and the scripts all
take a `MeasureConfig` instead of their own (target, warmup, steps, timeout)
arguments, so they share one set of defaults.
"""

import dataclasses
from typing import Tuple

from tfplace.errors import MeasureError

# The longest deadline a config takes (a week): longer ones, and `inf`,
# overflow TF's millisecond deadlines and Python's thread waits (an abort).
MAX_TIMEOUT_S = 7 * 24 * 3600.0


@dataclasses.dataclass(frozen=True)
class MeasureConfig:
  """Where and how long to run the training steps of one placement.

  The defaults are one set for every caller:
  * `steps=10`: with 5 timed steps per placement the fidelity script's median
    error was ~1.5x higher (10.2 % vs 6.8 %, see WORKSPACE_NOTES.md): on a
    shared machine the median of 5 is mostly noise.
  * `warmup=2`: the first step after initialization allocates buffers and
    partitions the graph on each worker; two untimed steps absorb that.
  * `timeout_s=300`: a bound on one placement's whole measurement (opening
    the session, init, warmup, timed, traced and profiled steps). The
    calibration runs used 120 s; 300 s is kept because it need not be short
    to notice faults any more: a dead worker is found by the health check
    within `health_interval_s`, a hung one by `step_timeout_s`.
  * `step_timeout_s=120`: the deadline of each single `Session.run` (and of
    closing the session): only a stuck run reaches it; raise it for a model
    whose one step takes longer.
  * `health_interval_s=0.5`: how often the worker processes of a server
    cluster are checked (a TCP connect each) while steps run.

  Attributes:
    target: session target: "" (or "local", stored as "") runs in this
      process on logical CPU devices and its GPUs; "grpc://host:port" runs
      on a TF server cluster.
    warmup: untimed steps after initialization (a graph with an input
      pipeline always gets at least one, which fills its buffers).
    steps: timed steps (no tracing); their median is the step time.
    timeout_s: deadline of the whole measurement of one placement.
    step_timeout_s: deadline of each `Session.run` (capped by what is left
      of `timeout_s`).
    health_interval_s: seconds between checks that every worker of a server
      cluster is alive (no checks in process).
    workers: "host:port" of every worker of the target's cluster, in task
      order, checked while steps run (empty: those of the `LocalCluster` of
      this process with this target, else the target's server alone); a
      list that is not a `LocalCluster`'s is first asked, once per
      process, whether address i is task i (`runner.measure`).
  """
  target: str = ""
  warmup: int = 2
  steps: int = 10
  timeout_s: float = 300.0
  step_timeout_s: float = 120.0
  health_interval_s: float = 0.5
  workers: Tuple[str, ...] = ()

  def __post_init__(self):
    if self.target == "local":  # As `tfplace.place_on_target` names it.
      object.__setattr__(self, "target", "")
    object.__setattr__(self, "workers", tuple(
        w.replace("grpc://", "") for w in self.workers))
    if int(self.steps) != self.steps or self.steps < 1:
      raise MeasureError(f"steps must be an integer >= 1, got {self.steps}")
    if int(self.warmup) != self.warmup or self.warmup < 0:
      raise MeasureError(f"warmup must be an integer >= 0, got {self.warmup}")
    for name in ("timeout_s", "step_timeout_s", "health_interval_s"):
      value = getattr(self, name)
      if not 0 < value <= MAX_TIMEOUT_S:
        raise MeasureError(f"{name} must be > 0 and at most "
                           f"{MAX_TIMEOUT_S:.0f} s (a week), got {value}")
    if self.target and not self.target.startswith("grpc://"):
      hint = (f" (grpc://{self.target}?)"
              if ":" in self.target and "://" not in self.target else "")
      raise MeasureError(f"target {self.target!r} is not grpc://host:port"
                         f"{hint}; leave it empty (or 'local') to run in this "
                         "process")

  @property
  def remote(self) -> bool:
    """True when the steps run on a TF server cluster."""
    return bool(self.target)

  def replace(self, **changes) -> "MeasureConfig":
    """A copy with some fields changed."""
    return dataclasses.replace(self, **changes)
