"""The one memory estimate placers use: bytes each group charges its device.

A group charges its persistent bytes (variables, optimizer slots) plus its
members' output bytes times `activation_fraction`. With the default 1.0
every activation of the step is counted as alive at once: a training step
keeps the forward outputs until the backward pass reads them, so this is the
conservative upper estimate Baechi (SoCC 2020) also uses; the simulator
tracks the real peak, which is lower. A device may be filled up to
`memory_fraction` of its memory.
"""

from typing import Optional, Sequence

import numpy as np

from tfplace.cost.cluster import Cluster
from tfplace.errors import PlacementError
from tfplace.grouping.group_graph import GroupGraph


class MemoryBudget:
  """Tracks the estimated memory placed on each device so far.

  Attributes:
    need: float64 [G], bytes each group charges.
    capacity: float64 [D], bytes each device may hold.
    used: float64 [D], bytes charged so far.
  """

  def __init__(self, groups: GroupGraph, cluster: Cluster,
               activation_fraction: float = 1.0,
               memory_fraction: float = 1.0):
    if not 0.0 < memory_fraction <= 1.0:
      raise PlacementError(
          f"memory_fraction must be in (0, 1], got {memory_fraction}")
    if not 0.0 <= activation_fraction <= 1.0:
      raise PlacementError(f"activation_fraction must be in [0, 1], got "
                           f"{activation_fraction}")
    self.need = (groups.param_bytes.astype(np.float64) +
                 activation_fraction * groups.output_bytes.astype(np.float64))
    self.capacity = np.array([d.memory_bytes for d in cluster.devices],
                             dtype=np.float64) * memory_fraction
    self.used = np.zeros(cluster.num_devices)
    self._allowed = groups.allowed

  def fits(self, group: int, device: int, extra: float = 0.0) -> bool:
    """True if `group` (and `extra` bytes) still fit on `device` (memory
    only)."""
    return bool(self.used[device] + self.need[group] + extra <=
                self.capacity[device])

  def room(self, group: int, extra=0.0) -> np.ndarray:
    """bool [D]: devices `group` (and `extra` bytes, a scalar or [D]) still
    fits on (memory only)."""
    return self.used + self.need[group] + extra <= self.capacity

  def add(self, group: int, device: int) -> None:
    self.used[device] += self.need[group]

  def first_fit(self, group: int, order: Sequence[int]) -> Optional[int]:
    """The first device in `order` that runs the group and has room, or None."""
    allowed = self._allowed[group]
    for d in order:
      if allowed[d] and self.fits(group, d):
        return int(d)
    return None

  def most_free(self, group: int, allowed: np.ndarray) -> int:
    """The device in the `allowed` mask with the most free memory."""
    free = np.where(allowed, self.capacity - self.used, -np.inf)
    return int(np.argmax(free))
