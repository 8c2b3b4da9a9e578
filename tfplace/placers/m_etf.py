"""m-ETF: memory-constrained Earliest Task First (Baechi, SoCC 2020).

List scheduling (Hwang et al., SIAM J. Comput. 1989) with Baechi's memory
check: repeatedly schedule the (ready op, device) pair with the earliest start
time, where

    start(op, d) = max(free(d), max over inputs i of finish(i) + xfer(i -> d))

and xfer is the link's latency + bytes / bandwidth when input i sits on
another device (0 on the same device). A device is skipped for an op when the
op's colocation group is bound elsewhere, has no kernel there, or would
overflow the device's memory. Ties go to the op with the larger b-level (the
longest compute path to a sink), then to the device that finishes it first.

Speed: an op's data-ready time per device is fixed once all its inputs are
scheduled, so each device keeps two heaps: `pending` (ready ops keyed by
data-ready time, later than the device is free) and `avail` (ops whose data
is there when the device frees, keyed by priority). Each step looks at the
heads of 2D heaps; stale entries (scheduled ops, groups bound elsewhere,
devices now too full) are dropped when they reach a head, and an op dropped
while its group is unbound is queued again on the devices with room then
(room can grow: a received tensor's charge is given back when its producer
lands on the receiving device). That makes the
whole schedule O((E + M D) log M) instead of the naive O(M^2 D) scan.
"""

import heapq
from typing import List, Optional, Tuple

import numpy as np

from tfplace.placers import baechi_common as common
from tfplace.placers.registry import register_placer


@register_placer("m_etf")
class METfPlacer(common.BaechiPlacer):
  """Baechi's m-ETF placer.

  Paper: Jeon, Liu, Xu et al., "Baechi: Fast Device Placement of Machine
  Learning Graphs", ACM SoCC 2020 (m-ETF; ETF from Hwang, Chow, Anger, Lee,
  SIAM J. Comput. 1989).
  """

  name = "m_etf"

  def device_ids(self, view: common.OpView) -> np.ndarray:
    return EtfScheduler(view).run()


class EtfScheduler:
  """The m-ETF list scheduler; m-SCT subclasses it to favour children.

  Attributes:
    device_of: int [M], device per op (-1 while unscheduled).
    finish: float64 [M], simulated finish time per op.
    free: float64 [D], when each device is free.
    last_op: int [D], the op scheduled last on each device (-1 if none).
  """

  def __init__(self, view: common.OpView):
    self.view = view
    m, d = view.num_ops, view.num_devices
    self.memory = common.MemoryState(view)
    self.priority = view.blevel()
    self.device_of = np.full(m, -1, dtype=np.int64)
    self.finish = np.zeros(m)
    self.free = np.zeros(d)
    self.last_op = np.full(d, -1, dtype=np.int64)
    self.data_ready = np.zeros((m, d))
    self.ready = np.zeros(m, dtype=bool)
    self.forced = np.full(m, -1, dtype=np.int64)
    self.queued = np.zeros((m, d), dtype=bool)
    self.pushes = 0  # Entries queued so far.
    self.indegree = np.diff(view.pred_ptr).astype(np.int64)
    self.pending: List[List[Tuple[float, float, int]]] = [[] for _ in range(d)]
    self.avail: List[List[Tuple[float, int]]] = [[] for _ in range(d)]

  def run(self) -> np.ndarray:
    """Schedules every op; returns the device id per op."""
    for op in np.flatnonzero(self.indegree == 0):
      self._make_ready(int(op))
    for _ in range(self.view.num_ops):
      choice = self._urgent() or self._earliest()
      if choice is None:
        raise AssertionError("m-ETF: no schedulable op left; graph has a cycle?")
      self._schedule(*choice)
    return self.device_of

  # ---- hooks for m-SCT ---------------------------------------------------

  def _urgent(self) -> Optional[Tuple[int, int]]:
    """An (op, device) that must go before the ETF choice; none in m-ETF."""
    return None

  def _on_ready(self, op: int) -> None:
    """Called when all inputs of `op` are scheduled."""

  # ---- ETF core ----------------------------------------------------------

  def start_time(self, op: int, device: int) -> float:
    return max(self.free[device], self.data_ready[op, device])

  def can_go(self, op: int, device: int) -> bool:
    """True if unscheduled `op` may be scheduled on `device` now."""
    if self.device_of[op] >= 0:
      return False
    if self.memory.group_device[self.view.group_of[op]] >= 0:
      return self.memory.fits(op, device)
    return self.forced[op] == device or self.memory.fits(op, device)

  def _earliest(self) -> Optional[Tuple[int, int]]:
    best, choice, pushes = None, None, -1
    # A head dropped on one device can requeue its op on a device already
    # looked at: look again until a pass queues nothing new.
    while pushes != self.pushes:
      pushes = self.pushes
      for d in range(self.view.num_devices):
        op, start = self._head(d)
        if op < 0:
          continue
        key = (start, -self.priority[op], start + self.view.compute[op, d], d)
        if best is None or key < best:
          best, choice = key, (op, d)
    return choice

  def _head(self, d: int) -> Tuple[int, float]:
    """(best op, its start) on device d, dropping stale heap entries."""
    pending, avail, free = self.pending[d], self.avail[d], self.free[d]
    while pending and pending[0][0] <= free:
      _, neg_prio, op = heapq.heappop(pending)
      heapq.heappush(avail, (neg_prio, op))
    while avail:
      op = avail[0][1]
      if self.can_go(op, d):
        return op, free
      heapq.heappop(avail)
      self._requeue(op, d)
    while pending:
      ready_at, _, op = pending[0]
      if self.can_go(op, d):
        return op, ready_at
      heapq.heappop(pending)
      self._requeue(op, d)
    return -1, np.inf

  def _requeue(self, op: int, d: int) -> None:
    """After `op`'s entry on `d` was dropped: if its group is still unbound,
    queues it on the devices that have room now (memory charged for
    received tensors is given back as producers are placed, so these can
    differ from those it was queued on), or forces it onto a fallback."""
    self.queued[op, d] = False
    if self.device_of[op] >= 0 or self.memory.group_device[
        self.view.group_of[op]] >= 0:
      return
    devices = self.memory.devices_for(op)
    if len(devices):
      self._push(op, devices)
    else:
      self._push(op, [self.memory.fallback_device(op)], forced=True)

  def _push(self, op: int, devices, forced: bool = False) -> None:
    for d in devices:
      d = int(d)
      if forced:
        self.forced[op] = d
      if self.queued[op, d]:
        continue
      self.queued[op, d] = True
      self.pushes += 1
      entry = (self.data_ready[op, d], -self.priority[op], op)
      if entry[0] <= self.free[d]:
        heapq.heappush(self.avail[d], entry[1:])
      else:
        heapq.heappush(self.pending[d], entry)

  def _make_ready(self, op: int) -> None:
    view = self.view
    preds, nbytes = view.preds(op)
    if len(preds):
      arrive = self.finish[preds][:, None] + common.transfer_matrix(
          view, self.device_of[preds], nbytes)
      self.data_ready[op] = arrive.max(axis=0)
    self.ready[op] = True
    devices = self.memory.devices_for(op)
    if not len(devices):
      self._push(op, [self.memory.fallback_device(op)], forced=True)
    else:
      self._push(op, devices)
    self._on_ready(op)

  def _schedule(self, op: int, d: int) -> None:
    view = self.view
    start = self.start_time(op, d)
    self.finish[op] = self.free[d] = start + view.compute[op, d]
    self.device_of[op] = d
    self.last_op[d] = op
    if self.memory.bind(op, d):
      members = view.group_members[view.group_of[op]]
      waiting = members[self.ready[members] & (self.device_of[members] < 0)]
      self._push_many(waiting, d)
    for succ in view.succs(op):
      self.indegree[succ] -= 1
      if self.indegree[succ] == 0:
        self._make_ready(int(succ))

  def _push_many(self, ops: np.ndarray, d: int) -> None:
    """Re-queues ready ops of a just-bound group on its device."""
    for op in ops:
      self._push(int(op), [d])
