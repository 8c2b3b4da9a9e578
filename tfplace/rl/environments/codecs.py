"""Actions of the learned placers <-> a device per colocation group.

  * `UnitCodec` (ColocRL): the action is one device per unit, a unit being a
    coarse group of colocation groups; every colocation group goes where its
    unit goes.
  * `HierarchicalCodec` (hierarchical planner): the action is a dict,
    ``groups`` (per colocation group, one of N groups, or one of D "pinned
    to device d" choices) and ``devices`` (per group, a device). A colocation
    group goes to its group's device. Pinned choices exist for colocation
    groups that cannot go everywhere (no kernel on some device, or too big
    for its memory): their logits over the N groups are masked, so such a
    group is always placed directly on an allowed device; the other groups
    never take a pinned choice. That keeps the kernel mask exact whatever
    grouping is sampled.

`encode` gives the action that reproduces a given placement (the imitation
target of the warm start).
"""

import abc
from typing import Dict, Optional

import numpy as np
from tf_agents.specs import array_spec

from tfplace.errors import PlacementError


class ActionCodec(abc.ABC):
  """Turns actions into placements and back.

  Attributes:
    allowed: bool [U, D], the observation: where each unit may go.
    num_groups: G, colocation groups.
    num_devices: D.
  """

  def __init__(self, allowed: np.ndarray, num_groups: int):
    self.allowed = np.asarray(allowed, dtype=bool)
    self.num_groups = num_groups
    self.num_devices = self.allowed.shape[1]
    if not self.allowed.any(axis=1).all():
      raise PlacementError("some group fits on no device (no kernel or too "
                           "large for every device's memory)")

  @property
  def num_units(self) -> int:
    return self.allowed.shape[0]

  @abc.abstractmethod
  def action_spec(self):
    """The (unbatched) action spec, a nest of `BoundedArraySpec`s."""

  @abc.abstractmethod
  def decode(self, action) -> np.ndarray:
    """int32 [B, G] device per colocation group from a batch of actions."""

  @abc.abstractmethod
  def encode(self, devices: np.ndarray):
    """The unbatched action that places colocation groups on `devices` [G]."""


class UnitCodec(ActionCodec):
  """One device per unit (a coarse group of colocation groups)."""

  def __init__(self, unit_of: np.ndarray, group_allowed: np.ndarray):
    """Args:
      unit_of: int [G], the unit of each colocation group (0..U-1).
      group_allowed: bool [G, D], where each colocation group may go.
    """
    self.unit_of = np.asarray(unit_of, dtype=np.int32)
    num_units = int(self.unit_of.max()) + 1
    blocked = np.zeros((num_units, group_allowed.shape[1]), dtype=np.int64)
    np.add.at(blocked, self.unit_of, ~np.asarray(group_allowed, dtype=bool))
    super().__init__(blocked == 0, len(self.unit_of))

  def action_spec(self):
    return array_spec.BoundedArraySpec(
        (self.num_units,), np.int32, 0, self.num_devices - 1, name="devices")

  def decode(self, action) -> np.ndarray:
    return np.asarray(action, dtype=np.int32)[:, self.unit_of]

  def encode(self, devices: np.ndarray) -> np.ndarray:
    """Each unit's most common device among its members (exact when units
    never straddle devices of `devices`)."""
    votes = np.zeros((self.num_units, self.num_devices), dtype=np.int64)
    np.add.at(votes, (self.unit_of, np.asarray(devices, dtype=np.int64)), 1)
    votes[~self.allowed] = -1
    return votes.argmax(axis=1).astype(np.int32)


class HierarchicalCodec(ActionCodec):
  """Per colocation group a group (or a pinned device); per group a device."""

  def __init__(self, group_allowed: np.ndarray, num_placer_groups: int,
               position: Optional[np.ndarray] = None):
    """Args:
      group_allowed: bool [G, D], where each colocation group may go.
      num_placer_groups: N, the groups the grouper chooses among.
      position: float [G] in [0, 1], topological position (for `encode`);
        default by group id.
    """
    super().__init__(group_allowed, len(group_allowed))
    if num_placer_groups < 1:
      raise PlacementError("the grouper needs at least one group")
    self.num_placer_groups = num_placer_groups
    self.free = self.allowed.all(axis=1)
    g = self.num_groups
    self.position = (np.arange(g) / max(g - 1, 1) if position is None
                     else np.asarray(position, dtype=np.float64))

  def action_spec(self) -> Dict[str, array_spec.BoundedArraySpec]:
    n, d = self.num_placer_groups, self.num_devices
    return {
        "groups": array_spec.BoundedArraySpec(
            (self.num_groups,), np.int32, 0, n + d - 1, name="groups"),
        "devices": array_spec.BoundedArraySpec(
            (n,), np.int32, 0, d - 1, name="devices"),
    }

  def decode(self, action) -> np.ndarray:
    groups = np.asarray(action["groups"], dtype=np.int32)
    devices = np.asarray(action["devices"], dtype=np.int32)
    n = self.num_placer_groups
    grouped = np.take_along_axis(devices, np.minimum(groups, n - 1), axis=1)
    return np.where(groups < n, grouped, groups - n).astype(np.int32)

  def encode(self, devices: np.ndarray) -> Dict[str, np.ndarray]:
    """Groups = (topological chunk, device) pairs: group `chunk * D + d`
    holds the free colocation groups of that chunk placed on d; with N // D
    chunks of equal position range. Pinned groups keep their device."""
    n, d = self.num_placer_groups, self.num_devices
    devices = np.asarray(devices, dtype=np.int32)
    chunks = max(n // d, 1)
    chunk = np.minimum((self.position * chunks).astype(np.int64), chunks - 1)
    target = chunk * d + devices
    if chunks * d > n:  # Fewer groups than devices: group index = device % n.
      target = devices % n
    groups = np.where(self.free, target, n + devices).astype(np.int32)
    placer = (np.arange(n) % d).astype(np.int32)
    return {"groups": groups, "devices": placer}
