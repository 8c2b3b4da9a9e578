"""SimResult: what the simulator predicts for one placement."""

import dataclasses
import math
from typing import Optional, Sequence, Tuple

import numpy as np

from tfplace.units import format_bytes


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
    num_transfers: messages sent between devices (one per tensor and
      remote device that reads it, and on server clusters one per op and
      remote device its control edges reach, and the fetched loss to the
      client's device; none for what TF's runtime does not send:
      `tfplace.simulator.replicated_constants`, `dead_accumulators`).
    schedule: op executions, if requested.
    transfers: transfers, if requested.
    device_names: the cluster's device names, index order (the simulator's
      own tuple, shared: no copy per result).
    memory_capacity_bytes: float64 [D], each device's memory (shared too).
  """
  step_time_s: float
  feasible: bool
  device_busy_s: np.ndarray
  peak_memory_bytes: np.ndarray
  bytes_moved: int
  oom_devices: Tuple[int, ...] = ()
  num_transfers: int = 0
  schedule: Optional[Tuple[ScheduledOp, ...]] = None
  transfers: Optional[Tuple[ScheduledTransfer, ...]] = None
  device_names: Tuple[str, ...] = ()
  memory_capacity_bytes: Optional[np.ndarray] = None

  def __str__(self) -> str:
    return self.format()

  def to_dict(self) -> dict:
    """The result as JSON-ready data, per device by name (what `tfplace
    simulate --json` prints): step_time_s (None if infeasible), feasible,
    peak_memory_bytes and device_busy_s as {device: value}, bytes_moved,
    transfers (`num_transfers`), oom_devices (names)."""
    names = self._names()
    step = self.step_time_s if math.isfinite(self.step_time_s) else None
    return {
        "step_time_s": step, "feasible": bool(self.feasible),
        "peak_memory_bytes": {n: int(v) for n, v in
                              zip(names, self.peak_memory_bytes)},
        "device_busy_s": {n: float(v) for n, v in
                          zip(names, self.device_busy_s)},
        "bytes_moved": int(self.bytes_moved),
        "transfers": int(self.num_transfers),
        "oom_devices": [names[i] for i in self.oom_devices]}

  def _names(self, device_names: Optional[Sequence[str]] = None
             ) -> Sequence[str]:
    """Device names by index: given, stored, else "device 0", ..."""
    return list(device_names or self.device_names or
                [f"device {i}" for i in range(len(self.device_busy_s))])

  def format(self, device_names: Optional[Sequence[str]] = None) -> str:
    """The result as a few readable lines: step time, then per device its
    busy time and peak memory (of its capacity).

    Args:
      device_names: names by device index (default: the stored ones, else
        "device 0", "device 1", ...).
    """
    d = len(self.device_busy_s)
    names = self._names(device_names)
    if self.feasible and math.isfinite(self.step_time_s):
      head = f"step time {self.step_time_s * 1e3:.3f} ms"
    else:
      where = ", ".join(names[i] for i in self.oom_devices)
      head = ("infeasible: " + (f"out of memory on {where}" if where else
                                "an op has no kernel on its device"))
    lines = [head, f"moved between devices: {format_bytes(self.bytes_moved)}"
                   f" in {self.num_transfers} transfers"]
    width = max(len(n) for n in names) if names else 6
    lines.append(f"{'device':<{width}}  {'busy ms':>9}  peak memory")
    for i in range(d):
      peak = format_bytes(int(self.peak_memory_bytes[i]))
      if self.memory_capacity_bytes is not None:
        peak += f" of {format_bytes(float(self.memory_capacity_bytes[i]))}"
      flag = "  OUT OF MEMORY" if i in self.oom_devices else ""
      lines.append(f"{names[i]:<{width}}  {self.device_busy_s[i] * 1e3:9.3f}"
                   f"  {peak}{flag}")
    return "\n".join(lines)
