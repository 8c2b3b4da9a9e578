"""SimResult: what the simulator predicts for one placement."""

import dataclasses
from typing import Optional, Tuple

import numpy as np


@dataclasses.dataclass(frozen=True)
class ScheduledOp:
  """One op execution in a simulated schedule (for plots and debugging)."""
  op: int
  device: int
  start_s: float
  end_s: float


@dataclasses.dataclass(frozen=True)
class ScheduledTransfer:
  """One tensor transfer in a simulated schedule."""
  producer: int
  src_device: int
  dst_device: int
  nbytes: int
  start_s: float
  end_s: float


@dataclasses.dataclass(frozen=True)
class SimResult:
  """Predicted behaviour of a placement.

  Attributes:
    step_time_s: makespan of one training step plus the cluster's
      `step_overhead_s` (inf if infeasible).
    feasible: False if some device runs out of memory.
    device_busy_s: float64 [D], compute seconds per device.
    peak_memory_bytes: int64 [D], peak memory per device.
    bytes_moved: total bytes sent between devices.
    oom_devices: indices of devices over their memory.
    schedule: op executions, if requested.
    transfers: transfers, if requested.
  """
  step_time_s: float
  feasible: bool
  device_busy_s: np.ndarray
  peak_memory_bytes: np.ndarray
  bytes_moved: int
  oom_devices: Tuple[int, ...] = ()
  schedule: Optional[Tuple[ScheduledOp, ...]] = None
  transfers: Optional[Tuple[ScheduledTransfer, ...]] = None
