"""m-TOPO: memory-constrained topological placement (Baechi, SoCC 2020).

Walk the ops in topological order and fill the devices one after another: a
device takes ops until its share of the total compute (sum over ops of the
op's fastest allowed compute time, divided by the number of candidate devices)
is reached, or until the next op's colocation group would overflow its
memory; then the next device takes over. The last device takes whatever is
left. An op whose colocation group is already bound goes to that device; an
op whose group cannot use the current device (no kernel, or no memory) goes to
the next device in order that can take it, without moving the fill pointer
unless memory was the reason.
"""

import numpy as np

from tfplace.placers import baechi_common as common
from tfplace.placers.registry import register_placer


@register_placer("m_topo")
class MTopoPlacer(common.BaechiPlacer):
  """Baechi's m-TOPO placer.

  Paper: Jeon, Liu, Xu et al., "Baechi: Fast Device Placement of Machine
  Learning Graphs", ACM SoCC 2020 (section on m-TOPO).
  """

  name = "m_topo"

  def device_ids(self, view: common.OpView) -> np.ndarray:
    return topo_device_ids(view)


def topo_device_ids(view: common.OpView) -> np.ndarray:
  """Device id per op by m-TOPO."""
  memory = common.MemoryState(view)
  candidates = view.candidate_devices
  on_candidates = view.group_allowed[view.group_of][:, candidates].any(axis=1)
  work = np.where(np.isfinite(view.min_compute) & on_candidates,
                  view.min_compute, 0.0)
  share = work.sum() / len(candidates)
  load = np.zeros(view.num_devices)
  device_of = np.full(view.num_ops, -1, dtype=np.int64)
  cursor = 0  # Index into `candidates` of the device being filled.
  for op in view.topo_order:
    device = memory.group_device[view.group_of[op]]
    if device < 0:
      device, cursor = _pick(memory, candidates, cursor, op)
    memory.bind(op, device)
    device_of[op] = device
    load[device] += work[op]
    while (cursor < len(candidates) - 1 and share > 0 and
           load[candidates[cursor]] >= share * (1 - 1e-9)):
      cursor += 1
  return device_of


def _pick(memory: common.MemoryState, candidates: np.ndarray, cursor: int,
          op: int):
  """(device, new cursor) for an op whose group is not bound yet.

  The current device if the group fits there; else the next candidate that
  fits (the fill pointer moves there only if memory, not a missing kernel,
  ruled out the current device); else an earlier candidate with room; else
  any device with room (e.g. the CPU for a CPU-only op); else the device with
  most free memory (the placement is then over memory).
  """
  view = memory.view
  g = view.group_of[op]
  for k in range(cursor, len(candidates)):
    device = candidates[k]
    if memory.fits(op, device):
      moved = k > cursor and view.group_allowed[g, candidates[cursor]]
      return device, (k if moved else cursor)
  for device in list(candidates[:cursor]) + list(range(view.num_devices)):
    if memory.fits(op, device):
      return device, cursor
  return memory.fallback_device(op), cursor
