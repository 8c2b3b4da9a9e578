"""The compiled core of the discrete-event simulator (numba, arrays only).

`simulator.Simulator` prepares the arrays; this module runs the events. All
functions are `@njit(cache=True)`. The arrays travel in three named tuples
(numba passes them as plain structs):

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
    on its device whether or not it is simulated), lat, bw [D, D], mem_cap,
    slots, xfer_ovh [D] (host seconds per message sent or received),
    step_ovh (seconds added to every step time), overlap_lat (latency does
    not hold the link).
  Work: the per-placement state (`new_work`), reused across a batch.

Speed (measured on Inception-V3, 11,282 ops, k80x4): the event loop is one
function. numba passes every array argument of a call that LLVM does not
inline as ~7 words on the stack (~650 bytes per call here), which cost more
than the events themselves; the per-event handlers are inlined at numba's IR
level (`inline="always"`) for that reason. The ready queues are FIFOs (ready
times never decrease), not heaps. See `scripts/bench_simulator.py`.

Status codes returned: 0 ok, 1 out of memory (only when stopping early),
2 an op has no kernel on its device (infinite cost), 3 deadlock (a cycle),
4 an op ended at the instant it started while `strict` (the caller asked to
be told: a simulation restricted to the training step is exact only when
every op takes time; see `Simulator`).
"""

from typing import NamedTuple

import numpy as np
from numba import njit, prange

OK, OOM, NO_KERNEL, DEADLOCK, ZERO_TIME = 0, 1, 2, 3, 4


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
  lat: np.ndarray
  bw: np.ndarray
  mem_cap: np.ndarray
  slots: np.ndarray
  xfer_ovh: np.ndarray
  step_ovh: float
  overlap_lat: bool


class Work(NamedTuple):
  """Per-placement state. Results: start/end [m] (op times), busy/peak [D],
  x_tensor/x_dst/x_start/x_end [C] (the first K entries are the transfers).
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


@njit(cache=True)
def new_work(num_ops, num_entries, num_devices):
  """Uninitialized `Work` for `num_ops` simulated ops."""
  m, c, d = num_ops, num_entries, num_devices
  return Work(
      np.empty(m, np.int32), np.empty(m), np.empty(m, np.int64),
      np.empty(m, np.int64), np.empty(c, np.int64), np.empty(c, np.int64),
      np.empty(c, np.int64), np.empty(m, np.int64), np.empty(m, np.int64),
      np.zeros(c, np.int64), np.zeros(c, np.int64), np.zeros(c),
      np.zeros(c), np.zeros(m), np.zeros(m), np.empty(m + c + 1),
      np.empty(m + c + 1, np.int64), np.empty(m, np.int64),
      np.empty((4, d), np.int64), np.empty(d), np.empty(d), np.zeros(d),
      np.zeros(d), np.empty(d, np.int64), np.empty((d, d)),
      np.empty(d, np.int64), np.empty(d, np.int64))


# ---- the event heap, keyed by (time, int), ties by the int ----------------

@njit(cache=True)
def _less(t1, k1, t2, k2):
  return t1 < t2 or (t1 == t2 and k1 < k2)


@njit(cache=True)
def heap_push(times, keys, size, t, k):
  """Pushes (t, k) into the heap stored at times/keys[:size]."""
  i = size
  while i > 0:
    parent = (i - 1) >> 1
    if not _less(t, k, times[parent], keys[parent]):
      break
    times[i] = times[parent]
    keys[i] = keys[parent]
    i = parent
  times[i] = t
  keys[i] = k
  return size + 1


@njit(cache=True)
def heap_pop(times, keys, size):
  """Removes the minimum; returns (time, key, new size)."""
  top_t, top_k = times[0], keys[0]
  size -= 1
  t, k = times[size], keys[size]
  i = 0
  while True:
    child = 2 * i + 1
    if child >= size:
      break
    if child + 1 < size and _less(times[child + 1], keys[child + 1],
                                  times[child], keys[child]):
      child += 1
    if not _less(times[child], keys[child], t, k):
      break
    times[i] = times[child]
    keys[i] = keys[child]
    i = child
  times[i] = t
  keys[i] = k
  return top_t, top_k, size


# ---- ready queues -----------------------------------------------------------
# One queue per device, in the order its ops start: by the time they became
# ready, ties by topological rank. Each op enters once, so device d's queue is
# a segment of one array `rq` [m] of ranks, consumed from `head`. Ready times
# never decrease, so the queue is FIFO except among ops that became ready at
# the same time: those sit at the tail from `cur` on and are sorted by rank
# before the device next starts an op (O(1) per op plus a sort of each
# same-time batch, instead of a heap's O(log n)).
# rq_ptr [4, D] rows: head, tail, cur, unsorted flag; rq_time [D]: the ready
# time of the ops from `cur` on.
_HEAD, _TAIL, _CUR, _UNSORTED = 0, 1, 2, 3


@njit(cache=True)
def _sort_ranks(rq, lo, hi):
  """Sorts rq[lo:hi] (insertion sort when short: usually 1-3 ops)."""
  if hi - lo > 32:
    rq[lo:hi].sort()
    return
  for a in range(lo + 1, hi):
    v = rq[a]
    b = a - 1
    while b >= lo and rq[b] > v:
      rq[b + 1] = rq[b]
      b -= 1
    rq[b + 1] = v


@njit(cache=True)
def _sort_pending(d, rq, rq_ptr):
  """Sorts device d's ops that became ready at the latest time (the caller
  checks the unsorted flag: a call costs more than the check)."""
  _sort_ranks(rq, max(rq_ptr[_HEAD, d], rq_ptr[_CUR, d]), rq_ptr[_TAIL, d])
  rq_ptr[_UNSORTED, d] = 0


# ---- setup ----------------------------------------------------------------

@njit(cache=True)
def _init_state(dev_all, g, c, w):
  """Device, duration, memory (every graph op's parameters), free slots and
  ready-queue segments; returns NO_KERNEL if any graph op, simulated or not,
  has no kernel on its device, else OK."""
  cost, param_bytes, ops, dev, dur, mem = (c.cost, c.param_bytes, g.ops, w.dev,
                                           w.dur, w.mem)
  rq_ptr, count = w.rq_ptr, w.stamp
  status = OK
  mem[:] = 0.0
  for i in range(dev_all.shape[0]):
    if not np.isfinite(cost[i, dev_all[i]]):
      status = NO_KERNEL
    mem[dev_all[i]] += param_bytes[i]
  count[:] = 0
  for j in range(ops.shape[0]):
    d = dev_all[ops[j]]
    dev[j] = d
    dur[j] = cost[ops[j], d]
    count[d] += 1
  rq_ptr[_HEAD, 0] = 0
  for d in range(1, count.shape[0]):
    rq_ptr[_HEAD, d] = rq_ptr[_HEAD, d - 1] + count[d - 1]
  rq_ptr[_TAIL] = rq_ptr[_HEAD]
  rq_ptr[_CUR] = rq_ptr[_HEAD]
  rq_ptr[_UNSORTED] = 0
  w.rq_time[:] = 0.0
  w.free[:] = c.slots
  w.link_free[:] = 0.0
  return status


@njit(cache=True)
def plan_transfers(g, w):
  """Assigns one transfer per (tensor, remote destination device).

  Fills the reference counts, the transfer of each consumer entry and input,
  and the per-op pending counts; returns K.
  """
  t_prod, c_ptr, cons, entry_in = g.t_prod, g.c_ptr, g.cons, g.entry_in
  dev, pending, src_ref, copy_ref = w.dev, w.pending, w.src_ref, w.copy_ref
  entry_x, in_x, x_first, x_count = w.entry_x, w.in_x, w.x_first, w.x_count
  x_tensor, x_dst, stamp, slot = w.x_tensor, w.x_dst, w.stamp, w.slot
  pending[:] = g.pred_count
  src_ref[:] = 0
  x_count[:] = 0
  stamp[:] = -1
  nx = 0
  for t in range(t_prod.shape[0]):
    p = t_prod[t]
    sp = dev[p]
    for e in range(c_ptr[t], c_ptr[t + 1]):
      c = cons[e]
      dc = dev[c]
      if dc == sp:
        src_ref[p] += 1
        entry_x[e] = -1
        in_x[entry_in[e]] = -1
        continue
      if stamp[dc] != t:
        stamp[dc] = t
        slot[dc] = nx
        x_tensor[nx] = t
        x_dst[nx] = dc
        copy_ref[nx] = 0
        if x_count[p] == 0:
          x_first[p] = nx
        x_count[p] += 1
        src_ref[p] += 1
        nx += 1
      entry_x[e] = slot[dc]
      in_x[entry_in[e]] = slot[dc]
      copy_ref[slot[dc]] += 1
      pending[c] += 1
  return nx


@njit(cache=True)
def add_transfer_overheads(g, w, nx, xfer_ovh):
  """Charges the host cost of cross-device messages to the ops around them.

  Transfer k of tensor t from device s to device d lengthens the producer's
  execution by xfer_ovh[s] (serialization before the send) and the execution
  of t's first consumer on d in topological order by xfer_ovh[d]
  (deserialization before its compute): once per transfer, so a tensor read
  by several ops on one remote device is paid for once on each end. Control
  edges from op p to ops on another device d are one dummy message per
  (p, d), charged the same way (no link time).
  """
  dev, dur, rank, cons, entry_x = w.dev, w.dur, g.rank, g.cons, w.entry_x
  ctrl_ptr, ctrl_dst, t_prod = g.ctrl_ptr, g.ctrl_dst, g.t_prod
  recv = np.full(nx, -1, np.int64)
  for e in range(cons.shape[0]):
    k = entry_x[e]
    if k >= 0 and (recv[k] < 0 or rank[cons[e]] < rank[recv[k]]):
      recv[k] = cons[e]
  for k in range(nx):
    p = t_prod[w.x_tensor[k]]
    dur[p] += xfer_ovh[dev[p]]
    dur[recv[k]] += xfer_ovh[w.x_dst[k]]
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
def _any_positive(values):
  for v in values:
    if v > 0:
      return True
  return False


@njit(cache=True)
def _first_ready(g, w):
  """Queues the ops with nothing to wait for (in rank order: no sort)."""
  topo, pending, dev, rq, rq_ptr = g.topo, w.pending, w.dev, w.rq, w.rq_ptr
  for r in range(topo.shape[0]):
    i = topo[r]
    if pending[i] == 0:
      d = dev[i]
      rq[rq_ptr[_TAIL, d]] = r
      rq_ptr[_TAIL, d] += 1


# ---- the event loop -----------------------------------------------------------

@njit(cache=True)
def _make_ready(j, now, dev, rank, rq, rq_ptr, rq_time):
  """Op j has everything it waits for at time `now`: appends it to its
  device's ready queue."""
  d = dev[j]
  if rq_time[d] != now:
    if rq_ptr[_UNSORTED, d]:
      _sort_pending(d, rq, rq_ptr)
    rq_time[d] = now
    rq_ptr[_CUR, d] = rq_ptr[_TAIL, d]
  rq[rq_ptr[_TAIL, d]] = rank[j]
  rq_ptr[_TAIL, d] += 1
  rq_ptr[_UNSORTED, d] = 1


@njit(cache=True)
def _over(peak, mem_cap):
  """True if some device's peak memory exceeds its capacity."""
  for d in range(peak.shape[0]):
    if peak[d] > mem_cap[d]:
      return True
  return False


@njit(cache=True)
def _event_loop(g, c, w, stop_on_oom, strict):
  """Runs the events of one placement; returns (makespan, status, bytes
  moved).

  One function on purpose (see the module docstring): at each time, start
  ready ops on free devices (ZERO_TIME if one ends at once and `strict`),
  then handle every event at the next time: a transfer arrives (the source
  copy loses a reference, consumers on the destination may become ready) or
  an op ends (its transfers are queued on their links, FIFO; it drops its
  references to the tensors it read; its successors wait for one op fewer).
  With `overlap_lat` a transfer holds its link for bytes / bandwidth only.
  """
  m = g.ops.shape[0]
  # Every array in a local: numba reference-counts each attribute read.
  topo, rank, t_prod, t_bytes, c_ptr, cons = (g.topo, g.rank, g.t_prod,
                                              g.t_bytes, g.c_ptr, g.cons)
  in_ptr, in_prod, in_bytes, succ_ptr, succ = (g.in_ptr, g.in_prod,
                                               g.in_bytes, g.succ_ptr, g.succ)
  out_bytes, bw, lat, overlap_lat = c.out_bytes, c.bw, c.lat, c.overlap_lat
  dur, dev, mem, peak, busy, free = w.dur, w.dev, w.mem, w.peak, w.busy, w.free
  rq, rq_ptr, rq_time, ev_t, ev_k = w.rq, w.rq_ptr, w.rq_time, w.ev_t, w.ev_k
  pending, src_ref, copy_ref = w.pending, w.src_ref, w.copy_ref
  entry_x, in_x, x_first, x_count = w.entry_x, w.in_x, w.x_first, w.x_count
  x_dst, x_tensor, x_start, x_end = w.x_dst, w.x_tensor, w.x_start, w.x_end
  start_t, end_t, link_free = w.start, w.end, w.link_free
  done, ev_size, moved, step, now = 0, 0, 0.0, 0.0, 0.0
  while True:
    for d in range(free.shape[0]):  # Start ready ops.
      if free[d] > 0 and rq_ptr[_UNSORTED, d]:
        _sort_pending(d, rq, rq_ptr)
      while free[d] > 0 and rq_ptr[_HEAD, d] < rq_ptr[_TAIL, d]:
        i = topo[rq[rq_ptr[_HEAD, d]]]
        rq_ptr[_HEAD, d] += 1
        free[d] -= 1
        start_t[i] = now
        end_t[i] = now + dur[i]
        if strict and end_t[i] == now:
          return np.inf, ZERO_TIME, moved
        busy[d] += dur[i]
        mem[d] += out_bytes[i]
        if mem[d] > peak[d]:
          peak[d] = mem[d]
        ev_size = heap_push(ev_t, ev_k, ev_size, end_t[i], i)
    if ev_size == 0:
      break
    now = ev_t[0]
    while ev_size > 0 and ev_t[0] == now:
      _, key, ev_size = heap_pop(ev_t, ev_k, ev_size)
      if key >= m:  # Transfer key - m arrived.
        k = key - m
        t = x_tensor[k]
        p = t_prod[t]
        src_ref[p] -= 1
        if src_ref[p] == 0:
          mem[dev[p]] -= out_bytes[p]
        for e in range(c_ptr[t], c_ptr[t + 1]):
          if entry_x[e] == k:
            j = cons[e]
            pending[j] -= 1
            if pending[j] == 0:
              _make_ready(j, now, dev, rank, rq, rq_ptr, rq_time)
        continue
      done += 1  # Op key ended.
      step = now
      s = dev[key]
      free[s] += 1
      sent = 0.0
      for k in range(x_first[key], x_first[key] + x_count[key]):
        d = x_dst[k]
        nbytes = t_bytes[x_tensor[k]]
        start = max(now, link_free[s, d])
        busy_until = start + nbytes / bw[s, d]
        end = start + lat[s, d] + nbytes / bw[s, d]
        link_free[s, d] = busy_until if overlap_lat else end
        x_start[k] = start
        x_end[k] = end
        mem[d] += nbytes
        if mem[d] > peak[d]:
          peak[d] = mem[d]
        sent += nbytes
        ev_size = heap_push(ev_t, ev_k, ev_size, end, m + k)
      moved += sent
      for n in range(in_ptr[key], in_ptr[key + 1]):
        k = in_x[n]
        if k < 0:
          p = in_prod[n]
          src_ref[p] -= 1
          if src_ref[p] == 0:
            mem[dev[p]] -= out_bytes[p]
        else:
          copy_ref[k] -= 1
          if copy_ref[k] == 0:
            mem[x_dst[k]] -= in_bytes[n]
      if src_ref[key] == 0:
        mem[s] -= out_bytes[key]
      for n in range(succ_ptr[key], succ_ptr[key + 1]):
        j = succ[n]
        pending[j] -= 1
        if pending[j] == 0:
          _make_ready(j, now, dev, rank, rq, rq_ptr, rq_time)
    if stop_on_oom and _over(peak, c.mem_cap):
      return np.inf, OOM, moved
  if done != m:
    return np.inf, DEADLOCK, moved
  if _over(peak, c.mem_cap):
    return np.inf, OOM, moved
  return step, OK, moved


@njit(cache=True)
def run_one(dev_all, g, c, w, stop_on_oom, strict):
  """Simulates one placement `dev_all` [M] in `w`.

  Fills w.start/end [m], w.busy/peak [D] and the transfer arrays. With
  `strict`, stops with ZERO_TIME as soon as an op ends when it starts.

  Returns:
    (step time, status, number of transfers K, bytes moved); the step time
    is the makespan plus `c.step_ovh`.
  """
  nd = c.slots.shape[0]
  status = _init_state(dev_all, g, c, w)
  if status != OK:
    w.busy[:] = 0.0
    w.peak[:] = 0.0
    return np.inf, status, 0, 0.0
  w.busy[:] = 0.0
  w.peak[:] = w.mem
  if stop_on_oom and _over(w.peak, c.mem_cap):
    return np.inf, OOM, 0, 0.0
  nx = plan_transfers(g, w)
  if _any_positive(c.xfer_ovh):
    add_transfer_overheads(g, w, nx, c.xfer_ovh)
  _first_ready(g, w)
  step, status, moved = _event_loop(g, c, w, stop_on_oom, strict)
  if status != OK:
    return np.inf, status, nx, moved
  return step + c.step_ovh, OK, nx, moved


@njit(cache=True)
def _run_rows(devs, rows, g, c, strict, out, codes):
  """Simulates devs[rows] with one `Work`, stopping early on OOM."""
  w = new_work(g.ops.shape[0], g.cons.shape[0], c.slots.shape[0])
  for r in rows:
    out[r], codes[r], _, _ = run_one(devs[r], g, c, w, True, strict)


@njit(cache=True)
def run_batch(devs, g, c, strict):
  """Step time per row of `devs` [B, M] (inf where infeasible) and the
  status of each row (ZERO_TIME rows need the unrestricted graph)."""
  b = devs.shape[0]
  out = np.empty(b, np.float64)
  codes = np.zeros(b, np.int64)
  _run_rows(devs, np.arange(b), g, c, strict, out, codes)
  return out, codes


@njit(cache=True, parallel=True)
def run_batch_parallel(devs, g, c, strict, num_chunks):
  """`run_batch` with the rows split into `num_chunks` chunks run on
  numba's thread pool (one `Work` per chunk)."""
  b = devs.shape[0]
  out = np.empty(b, np.float64)
  codes = np.zeros(b, np.int64)
  for chunk in prange(num_chunks):
    rows = np.arange(chunk, b, num_chunks)
    _run_rows(devs, rows, g, c, strict, out, codes)
  return out, codes
