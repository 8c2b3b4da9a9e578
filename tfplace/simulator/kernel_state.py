"""The simulator kernel's state: its input arrays and per-placement setup.

The arrays travel in three named tuples (numba passes them as plain
structs):

  KernelGraph (`kernel_arrays.GraphArrays.kernel_graph()`; m simulated ops,
  M graph ops, T tensors, C consumer entries; the kernel numbers the
  simulated ops 0..m-1 and `ops [m]` maps them to graph ops):
    ops, topo, rank [m]; succ_ptr [m+1], succ [E] (data and control edges);
    pred_count [m]; t_prod, t_bytes [T], c_ptr [T+1], cons [C] (tensors
    sorted by producer and their unique consumers); in_ptr [m+1] and, per
    input n of an op, in_entry [C] (its consumer entry), in_prod [C] (the
    producer), in_bytes [C]; entry_in [C] (the input of each entry);
    ctrl_ptr [m+1], ctrl_dst (unique control-edge successors).
  KernelCluster: cost [M, D] (compute seconds of every graph op),
    out_bytes [m], param_bytes [M] (every graph op's parameters are resident
    on its device whether or not it is simulated), scratch [M, D] (bytes an
    op holds on its device while it runs), lat, bw [D, D], mem_cap,
    slots, xfer_ovh [D] (host seconds per message sent or received),
    xfer_byte [D] (host seconds per byte sent or received),
    step_ovh (seconds added to every step time), overlap_lat (latency does
    not hold the link), rendezvous (message work is done by a device with
    nothing else to run: `kernel._serve_messages`), lat_host [D, D] (the
    part of each link's latency spent on its two ends' cores, on
    rendezvous clusters; 0 elsewhere), tf_exec [D] (bool: the device orders
    its ready ops as TF's executor on one thread does, `kernel`), inline_s
    [D] (on those, ops that take at most this long run inline).
  Constant copies and the fetch (`plan_transfers` only; not in the tuples
  above, which every call in the event loop passes, field by field):
  t_repl [T] (a small constant TF copies to its consumers' devices when
  they span two hosts, `replicated_constants`), host [D] (where a copy
  read on each device lives: a CPU itself, an accelerator its task's CPU,
  or -1 - d where its task has none); fetch_op, fetch_bytes, client (the
  simulated op whose output the client fetches, -1 for none, its bytes,
  and the client's device).
  Work: the per-placement state (`new_work`), reused across a batch.
    Transfers k < X = C + len(ctrl_dst) + 1 (`max_transfers`): one per
    data tensor and remote consumer device, and on rendezvous clusters one
    per op and device its control edges reach on another device (TF's
    partitioner sends a dummy tensor) and the fetched loss to the client's
    device (x_tensor `FETCH`; `plan_transfers`).

Functions read every array into a local first: numba reference-counts each
attribute read of a named tuple.
"""

from typing import NamedTuple

import numpy as np
from numba import njit

class KernelGraph(NamedTuple):
  """Graph-side arrays (see the module docstring)."""
  ops: np.ndarray
  topo: np.ndarray
  rank: np.ndarray
  succ_ptr: np.ndarray
  succ: np.ndarray
  pred_count: np.ndarray
  t_prod: np.ndarray
  t_bytes: np.ndarray
  c_ptr: np.ndarray
  cons: np.ndarray
  in_ptr: np.ndarray
  in_entry: np.ndarray
  in_prod: np.ndarray
  in_bytes: np.ndarray
  entry_in: np.ndarray
  ctrl_ptr: np.ndarray
  ctrl_dst: np.ndarray


class KernelCluster(NamedTuple):
  """Cluster- and cost-side arrays (see the module docstring)."""
  cost: np.ndarray
  out_bytes: np.ndarray
  param_bytes: np.ndarray
  scratch: np.ndarray
  lat: np.ndarray
  bw: np.ndarray
  mem_cap: np.ndarray
  slots: np.ndarray
  xfer_ovh: np.ndarray
  xfer_byte: np.ndarray
  step_ovh: float
  overlap_lat: bool
  rendezvous: bool
  lat_host: np.ndarray
  recv_issue: np.ndarray
  tf_exec: np.ndarray
  inline_s: np.ndarray


class Work(NamedTuple):
  """Per-placement state. Results: start/end [m] (op times), busy/peak [D],
  x_tensor/x_dst/x_start/x_end [X] (the first K entries are the transfers).
  x_prod/x_bytes [X]: each transfer's producer op and bytes; x_tensor is
  -1 for a control message (0 bytes).
  Rendezvous transfers (`kernel._serve_messages`): running [D] (ops
  running on each device), x_send/x_recv [X] (the sender's and the
  receiver's host work on the transfer), and two lists per device, of transfers whose
  producer ended (out_head/out_tail [D], out_next [X]) and of arrivals not
  yet parsed (in_head/in_tail [D], in_next [X]); -1 ends a list. With a
  Recv issue phase (`kernel._issue_recvs`): x_req [X] (when the
  transfer's request reaches its sender), issue_end [D] (when each
  device's issue phase ends) and last_idle [D] (when the device last had
  no op running or ready; -1: not yet). On `tf_exec` devices
  (`kernel._make_ready_after`): iq [m] with iq_ptr [2, D] (head, tail), the
  ops to run inline, and stk [m] with stk_ptr [2, D] (base, top), the ops
  dispatched to the front of the thread's queue; both use rq's per-device
  segments.
  """
  dev: np.ndarray
  dur: np.ndarray
  pending: np.ndarray
  src_ref: np.ndarray
  copy_ref: np.ndarray
  entry_x: np.ndarray
  in_x: np.ndarray
  x_first: np.ndarray
  x_count: np.ndarray
  x_tensor: np.ndarray
  x_prod: np.ndarray
  x_bytes: np.ndarray
  x_dst: np.ndarray
  x_start: np.ndarray
  x_end: np.ndarray
  start: np.ndarray
  end: np.ndarray
  ev_t: np.ndarray
  ev_k: np.ndarray
  rq: np.ndarray
  rq_ptr: np.ndarray
  rq_time: np.ndarray
  mem: np.ndarray
  peak: np.ndarray
  busy: np.ndarray
  free: np.ndarray
  link_free: np.ndarray
  stamp: np.ndarray
  slot: np.ndarray
  running: np.ndarray
  x_send: np.ndarray
  x_recv: np.ndarray
  out_next: np.ndarray
  out_head: np.ndarray
  out_tail: np.ndarray
  in_next: np.ndarray
  in_head: np.ndarray
  in_tail: np.ndarray
  x_req: np.ndarray
  issue_end: np.ndarray
  last_idle: np.ndarray
  iq: np.ndarray
  iq_ptr: np.ndarray
  stk: np.ndarray
  stk_ptr: np.ndarray


@njit(cache=True)
def max_transfers(g):
  """X: the most transfers a placement can have (every consumer entry and
  every control edge remote, and the fetched loss)."""
  return g.cons.shape[0] + g.ctrl_dst.shape[0] + 1


@njit(cache=True)
def new_work(num_ops, num_entries, num_transfers, num_devices):
  """Uninitialized `Work` for `num_ops` simulated ops, `num_entries`
  consumer entries and at most `num_transfers` transfers."""
  m, e, c, d = num_ops, num_entries, num_transfers, num_devices
  return Work(
      np.empty(m, np.int32), np.empty(m), np.empty(m, np.int64),
      np.empty(m, np.int64), np.empty(c, np.int64), np.empty(e, np.int64),
      np.empty(e, np.int64), np.empty(m, np.int64), np.empty(m, np.int64),
      np.zeros(c, np.int64), np.zeros(c, np.int64), np.zeros(c),
      np.zeros(c, np.int64), np.zeros(c),
      np.zeros(c), np.zeros(m), np.zeros(m), np.empty(m + 2 * c + d + 1),
      np.empty(m + 2 * c + d + 1, np.int64), np.empty(m, np.int64),
      np.empty((4, d), np.int64), np.empty(d), np.empty(d), np.zeros(d),
      np.zeros(d), np.empty(d, np.int64), np.empty((d, d)),
      np.empty(d, np.int64), np.empty(d, np.int64), np.zeros(d, np.int64),
      np.zeros(c), np.zeros(c),
      np.empty(c, np.int64), np.full(d, -1, np.int64), np.empty(d, np.int64),
      np.empty(c, np.int64), np.full(d, -1, np.int64), np.empty(d, np.int64),
      np.zeros(c), np.zeros(d), np.full(d, -1.0),
      np.empty(m, np.int64), np.empty((2, d), np.int64),
      np.empty(m, np.int64), np.empty((2, d), np.int64))


# Rows of `Work.rq_ptr` [4, D], the ready queues (see `kernel`): head, tail,
# cur (the first op that became ready at `rq_time`), unsorted flag.
HEAD, TAIL, CUR, UNSORTED = 0, 1, 2, 3


@njit(cache=True)
def init_state(dev_all, g, c, w):
  """Device, duration, memory (every graph op's parameters), free slots and
  ready-queue segments; returns False if any graph op, simulated or not,
  has no kernel on its device."""
  cost, param_bytes, ops, dev, dur, mem = (c.cost, c.param_bytes, g.ops, w.dev,
                                           w.dur, w.mem)
  rq_ptr, count = w.rq_ptr, w.stamp
  kernels = True
  mem[:] = 0.0
  for i in range(dev_all.shape[0]):
    if not np.isfinite(cost[i, dev_all[i]]):
      kernels = False
    mem[dev_all[i]] += param_bytes[i]
  count[:] = 0
  for j in range(ops.shape[0]):
    d = dev_all[ops[j]]
    dev[j] = d
    dur[j] = cost[ops[j], d]
    count[d] += 1
  rq_ptr[HEAD, 0] = 0
  for d in range(1, count.shape[0]):
    rq_ptr[HEAD, d] = rq_ptr[HEAD, d - 1] + count[d - 1]
  rq_ptr[TAIL] = rq_ptr[HEAD]
  rq_ptr[CUR] = rq_ptr[HEAD]
  rq_ptr[UNSORTED] = 0
  w.iq_ptr[0] = rq_ptr[HEAD]
  w.iq_ptr[1] = rq_ptr[HEAD]
  w.stk_ptr[0] = rq_ptr[HEAD]
  w.stk_ptr[1] = rq_ptr[HEAD]
  w.rq_time[:] = 0.0
  w.free[:] = c.slots
  w.link_free[:] = 0.0
  w.running[:] = 0
  if c.rendezvous:
    w.out_head[:] = -1
    w.in_head[:] = -1
    w.issue_end[:] = 0.0
    w.last_idle[:] = -1.0
  return kernels


@njit(cache=True)
def _on_two_hosts(lo, hi, cons, dev, host):
  """True if the consumers cons[lo:hi] are on two hosts or more."""
  first = host[dev[cons[lo]]]
  for e in range(lo + 1, hi):
    if host[dev[cons[e]]] != first:
      return True
  return False


# x_tensor of the fetched loss's transfer (a control message's is -1).
FETCH = -2


@njit(cache=True)
def plan_transfers(g, w, control_messages, t_repl, host, fetch_op,
                   fetch_bytes, client):
  """Assigns one transfer per (tensor, remote destination device) and, with
  `control_messages`, one per (op, remote device its control edges reach),
  and one from `fetch_op` to `client` where they differ (a server cluster's
  client fetches the loss through task 0: TF sends it there; nothing waits
  for it but the step's end).
  A small constant TF replicates (`t_repl`: on a CPU, its consumers on
  two hosts or more, `replicated_constants`) is read where it is by its
  consumers on CPUs (each has its own copy there: no transfer).

  Fills the reference counts, the transfer of each consumer entry and input,
  each transfer's producer and bytes, and the per-op pending counts (an op
  whose control predecessor is on another device also waits for that
  message); returns K. Transfers are numbered by producer, so an op's are
  x_first[p], ..., x_first[p] + x_count[p] - 1.
  """
  t_prod, t_bytes, c_ptr, cons = g.t_prod, g.t_bytes, g.c_ptr, g.cons
  entry_in, ctrl_ptr, ctrl_dst = g.entry_in, g.ctrl_ptr, g.ctrl_dst
  dev, pending, src_ref, copy_ref = w.dev, w.pending, w.src_ref, w.copy_ref
  entry_x, in_x, x_first, x_count = w.entry_x, w.in_x, w.x_first, w.x_count
  x_tensor, x_dst, stamp, slot = w.x_tensor, w.x_dst, w.stamp, w.slot
  x_prod, x_bytes = w.x_prod, w.x_bytes
  pending[:] = g.pred_count
  src_ref[:] = 0
  x_count[:] = 0
  stamp[:] = -1
  nx = 0
  t = 0
  for p in range(dev.shape[0]):
    sp = dev[p]
    x_first[p] = nx
    while t < t_prod.shape[0] and t_prod[t] == p:
      copied = (t_repl[t] and host[sp] == sp
                and _on_two_hosts(c_ptr[t], c_ptr[t + 1], cons, dev, host))
      for e in range(c_ptr[t], c_ptr[t + 1]):
        c = cons[e]
        dc = dev[c]
        if dc == sp or (copied and host[dc] == dc):
          src_ref[p] += 1
          entry_x[e] = -1
          in_x[entry_in[e]] = -1
          continue
        if stamp[dc] != t:
          stamp[dc] = t
          slot[dc] = nx
          x_tensor[nx] = t
          x_prod[nx] = p
          x_bytes[nx] = t_bytes[t]
          x_dst[nx] = dc
          copy_ref[nx] = 0
          src_ref[p] += 1
          nx += 1
        entry_x[e] = slot[dc]
        in_x[entry_in[e]] = slot[dc]
        copy_ref[slot[dc]] += 1
        pending[c] += 1
      t += 1
    if control_messages:
      for n in range(ctrl_ptr[p], ctrl_ptr[p + 1]):
        c = ctrl_dst[n]
        dc = dev[c]
        if dc == sp:
          continue
        if stamp[dc] != -2 - p:  # Op stamps are negative, tensors' >= 0.
          stamp[dc] = -2 - p
          x_tensor[nx] = -1
          x_prod[nx] = p
          x_bytes[nx] = 0.0
          x_dst[nx] = dc
          nx += 1
        pending[c] += 1
    if control_messages and p == fetch_op and sp != client:
      x_tensor[nx] = FETCH
      x_prod[nx] = p
      x_bytes[nx] = fetch_bytes
      x_dst[nx] = client
      nx += 1
    x_count[p] = nx - x_first[p]
  return nx


@njit(cache=True)
def add_transfer_overheads(g, w, nx, xfer_ovh, xfer_byte, rendezvous):
  """Charges the host cost of cross-device messages to the ops around them.

  Transfer k (b bytes) from device s to device d lengthens the producer's
  execution by xfer_ovh[s] + b * xfer_byte[s] (serialization before the
  send) and the execution of its tensor's first consumer on d in
  topological order by xfer_ovh[d] + b * xfer_byte[d] (deserialization
  before its compute): once per transfer, so a tensor read by several ops
  on one remote device is paid for once on each end. With `rendezvous`
  the two parts are instead kept in w.x_send[k] and w.x_recv[k], for the
  event loop to charge when each end does its message work
  (`kernel._serve_messages`), and control messages are transfers already
  (`plan_transfers`); without, control edges from
  op p to ops on another device d are one dummy message per (p, d),
  charged to the ops (no link time).
  """
  dev, dur, rank, cons, entry_x = w.dev, w.dur, g.rank, g.cons, w.entry_x
  ctrl_ptr, ctrl_dst = g.ctrl_ptr, g.ctrl_dst
  x_prod, x_bytes, x_dst = w.x_prod, w.x_bytes, w.x_dst
  recv = np.full(0 if rendezvous else nx, -1, np.int64)  # First consumers.
  if not rendezvous:
    for e in range(cons.shape[0]):
      k = entry_x[e]
      if k >= 0 and (recv[k] < 0 or rank[cons[e]] < rank[recv[k]]):
        recv[k] = cons[e]
  for k in range(nx):
    p = x_prod[k]
    send = xfer_ovh[dev[p]] + x_bytes[k] * xfer_byte[dev[p]]
    cost = xfer_ovh[x_dst[k]] + x_bytes[k] * xfer_byte[x_dst[k]]
    if rendezvous:
      w.x_send[k] = send
      w.x_recv[k] = cost
    else:
      dur[p] += send
      dur[recv[k]] += cost
  if rendezvous:
    return
  nd = xfer_ovh.shape[0]
  stamp = np.full(nd, -1, np.int64)
  first = np.zeros(nd, np.int64)
  for p in range(ctrl_ptr.shape[0] - 1):
    sp = dev[p]
    for n in range(ctrl_ptr[p], ctrl_ptr[p + 1]):
      c = ctrl_dst[n]
      d = dev[c]
      if d == sp:
        continue
      if stamp[d] != p:
        stamp[d] = p
        first[d] = c
        dur[p] += xfer_ovh[sp]
      elif rank[c] < rank[first[d]]:
        first[d] = c
    for d in range(nd):
      if stamp[d] == p:
        dur[first[d]] += xfer_ovh[d]
        stamp[d] = -2


@njit(cache=True)
def any_positive(values):
  for v in values:
    if v > 0:
      return True
  return False


@njit(cache=True)
def first_ready(g, c, w):
  """Queues the ops with nothing to wait for (in rank order: no sort). On
  a `c.tf_exec` device they are dispatched from one of its threads (TF's
  worker starts a step on its compute pool), so they run last first."""
  topo, pending, dev, rq, rq_ptr = g.topo, w.pending, w.dev, w.rq, w.rq_ptr
  stk, stk_ptr = w.stk, w.stk_ptr
  for r in range(topo.shape[0]):
    i = topo[r]
    if pending[i] == 0:
      d = dev[i]
      if c.tf_exec[d]:
        stk[stk_ptr[1, d]] = i
        stk_ptr[1, d] += 1
        continue
      rq[rq_ptr[TAIL, d]] = r
      rq_ptr[TAIL, d] += 1
