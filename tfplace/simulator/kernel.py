"""The compiled core of the discrete-event simulator (numba, arrays only).

`simulate.Simulator` prepares the arrays; this module runs the events. All
functions are `@njit(cache=True)`; state lives in preallocated arrays and
scalars are threaded through return values (numba cannot pass ints by
reference).

Arrays (M ops, D devices, T tensors, C consumer entries, K transfers):
  dev [M] int32: device of each op.
  dur [M] float64: compute seconds of each op on its device.
  rank [M] int64: position in the topological order (tie breaker).
  succ_ptr [M+1], succ [E]: successors (data + control edges).
  pred_count [M]: predecessors per op (CSR entries, duplicates counted).
  t_prod [T], t_bytes [T], c_ptr [T+1], cons [C]: tensors sorted by producer
    and their unique consumers.
  in_ptr [M+1], in_entry [C]: the consumer entries (indices into `cons`) of
    each op, i.e. the tensors each op reads.
  lat, bw [D, D]: link latency (s) and bandwidth (bytes/s).
  mem_cap [D], slots [D], param_mem [D] (persistent bytes per device).
  ctrl_ptr [M+1], ctrl_dst: control-edge successors of each op (unique).
  xfer_ovh [D]: host seconds a device spends per message it sends or
    receives (added to the producing op and to the receiving op).
  step_ovh: fixed seconds added to every step time.
  overlap_lat: if True, latency does not hold the link (see _send_outputs).

Status codes returned: 0 ok, 1 out of memory (only when stopping early),
2 an op has no kernel on its device (infinite cost), 3 deadlock (a cycle).
"""

import numpy as np
from numba import njit

OK, OOM, NO_KERNEL, DEADLOCK = 0, 1, 2, 3


# ---- binary heaps keyed by (time, int), ties by the int -------------------

@njit(cache=True)
def _less(t1, k1, t2, k2):
  return t1 < t2 or (t1 == t2 and k1 < k2)


@njit(cache=True)
def heap_push(times, keys, base, size, t, k):
  """Pushes (t, k) into the heap stored at times/keys[base:base+size]."""
  i = size
  while i > 0:
    parent = (i - 1) >> 1
    if not _less(t, k, times[base + parent], keys[base + parent]):
      break
    times[base + i] = times[base + parent]
    keys[base + i] = keys[base + parent]
    i = parent
  times[base + i] = t
  keys[base + i] = k
  return size + 1


@njit(cache=True)
def heap_pop(times, keys, base, size):
  """Removes the minimum; returns (time, key, new size)."""
  top_t, top_k = times[base], keys[base]
  size -= 1
  t, k = times[base + size], keys[base + size]
  i = 0
  while True:
    child = 2 * i + 1
    if child >= size:
      break
    if child + 1 < size and _less(times[base + child + 1], keys[base + child + 1],
                                  times[base + child], keys[base + child]):
      child += 1
    if not _less(times[base + child], keys[base + child], t, k):
      break
    times[base + i] = times[base + child]
    keys[base + i] = keys[base + child]
    i = child
  times[base + i] = t
  keys[base + i] = k
  return top_t, top_k, size


# ---- setup ----------------------------------------------------------------

@njit(cache=True)
def plan_transfers(dev, t_prod, t_bytes, c_ptr, cons, num_ops, num_devices,
                   pending, src_ref, entry_x, x_tensor, x_dst, x_first,
                   x_count, copy_ref):
  """Assigns one transfer per (tensor, remote destination device).

  Fills the reference counts and per-op pending counts; returns K.
  """
  stamp = np.full(num_devices, -1, np.int64)
  slot = np.zeros(num_devices, np.int64)
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
        continue
      if stamp[dc] != t:
        stamp[dc] = t
        slot[dc] = nx
        x_tensor[nx] = t
        x_dst[nx] = dc
        if x_count[p] == 0:
          x_first[p] = nx
        x_count[p] += 1
        src_ref[p] += 1
        nx += 1
      entry_x[e] = slot[dc]
      copy_ref[slot[dc]] += 1
      pending[c] += 1
  return nx


@njit(cache=True)
def add_transfer_overheads(dur, dev, rank, t_prod, cons, entry_x, x_tensor,
                           x_dst, nx, ctrl_ptr, ctrl_dst, xfer_ovh):
  """Charges the host cost of cross-device messages to the ops around them.

  Transfer k of tensor t from device s to device d lengthens the producer's
  execution by xfer_ovh[s] (serialization before the send) and the execution
  of t's first consumer on d in topological order by xfer_ovh[d]
  (deserialization before its compute): once per transfer, so a tensor read
  by several ops on one remote device is paid for once on each end. Control
  edges from op p to ops on another device d are one dummy message per
  (p, d), charged the same way (no link time).
  """
  recv = np.full(nx, -1, np.int64)
  for e in range(cons.shape[0]):
    k = entry_x[e]
    if k >= 0 and (recv[k] < 0 or rank[cons[e]] < rank[recv[k]]):
      recv[k] = cons[e]
  for k in range(nx):
    p = t_prod[x_tensor[k]]
    dur[p] += xfer_ovh[dev[p]]
    dur[recv[k]] += xfer_ovh[x_dst[k]]
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


# ---- event handlers -------------------------------------------------------

@njit(cache=True)
def _send_outputs(i, now, dev, t_bytes, x_tensor, x_dst, x_first, x_count,
                  lat, bw, overlap_lat, link_free, x_start, x_end, mem, peak,
                  ev_t, ev_k, ev_size, num_ops):
  """Queues op i's outgoing transfers on their links (FIFO); returns
  (events size, bytes sent). With `overlap_lat` a transfer holds its link
  for bytes / bandwidth only (its latency overlaps later transfers)."""
  s = dev[i]
  sent = 0
  for k in range(x_first[i], x_first[i] + x_count[i]):
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
    ev_size = heap_push(ev_t, ev_k, 0, ev_size, end, num_ops + k)
  return ev_size, sent


@njit(cache=True)
def _release_inputs(i, dev, out_bytes, t_prod, t_bytes, in_ptr, in_entry,
                    entry_tensor, entry_x, x_dst, src_ref, copy_ref, mem):
  """Op i finished: drops its references to the tensors it read."""
  for n in range(in_ptr[i], in_ptr[i + 1]):
    e = in_entry[n]
    t = entry_tensor[e]
    k = entry_x[e]
    if k < 0:
      p = t_prod[t]
      src_ref[p] -= 1
      if src_ref[p] == 0:
        mem[dev[p]] -= out_bytes[p]
    else:
      copy_ref[k] -= 1
      if copy_ref[k] == 0:
        mem[x_dst[k]] -= t_bytes[t]
  if src_ref[i] == 0:
    mem[dev[i]] -= out_bytes[i]


@njit(cache=True)
def _make_ready(j, now, dev, rank, rq_t, rq_k, rq_base, rq_size):
  d = dev[j]
  rq_size[d] = heap_push(rq_t, rq_k, rq_base[d], rq_size[d], now, rank[j])


@njit(cache=True)
def _dispatch(now, topo, dev, dur, out_bytes, free, rq_t, rq_k, rq_base,
              rq_size, start, end, busy, mem, peak, ev_t, ev_k, ev_size):
  """Starts ready ops on every device with a free slot; returns events size."""
  for d in range(free.shape[0]):
    while free[d] > 0 and rq_size[d] > 0:
      _, r, rq_size[d] = heap_pop(rq_t, rq_k, rq_base[d], rq_size[d])
      i = topo[r]
      free[d] -= 1
      start[i] = now
      end[i] = now + dur[i]
      busy[d] += dur[i]
      mem[d] += out_bytes[i]
      if mem[d] > peak[d]:
        peak[d] = mem[d]
      ev_size = heap_push(ev_t, ev_k, 0, ev_size, end[i], i)
  return ev_size


@njit(cache=True)
def _on_transfer_done(k, now, dev, rank, t_prod, out_bytes, c_ptr, cons,
                      entry_x, x_tensor, src_ref, pending, mem, rq_t, rq_k,
                      rq_base, rq_size):
  """Transfer k arrived: the source copy loses a reference; consumers on the
  destination may become ready."""
  t = x_tensor[k]
  p = t_prod[t]
  src_ref[p] -= 1
  if src_ref[p] == 0:
    mem[dev[p]] -= out_bytes[p]
  for e in range(c_ptr[t], c_ptr[t + 1]):
    if entry_x[e] == k:
      c = cons[e]
      pending[c] -= 1
      if pending[c] == 0:
        _make_ready(c, now, dev, rank, rq_t, rq_k, rq_base, rq_size)


@njit(cache=True)
def _over(peak, mem_cap):
  """True if some device's peak memory exceeds its capacity."""
  for d in range(peak.shape[0]):
    if peak[d] > mem_cap[d]:
      return True
  return False


@njit(cache=True)
def _init_state(dev, cost, param_bytes, slots, mem_cap, num_devices):
  """Per-op durations, device memory holding the parameters, free slots,
  ready-queue segments; returns them and a status."""
  m = dev.shape[0]
  dur = np.empty(m, np.float64)
  mem = np.zeros(num_devices, np.float64)
  count = np.zeros(num_devices, np.int64)
  status = OK
  for i in range(m):
    dur[i] = cost[i, dev[i]]
    if not np.isfinite(dur[i]):
      status = NO_KERNEL
    mem[dev[i]] += param_bytes[i]
    count[dev[i]] += 1
  rq_base = np.zeros(num_devices, np.int64)
  for d in range(1, num_devices):
    rq_base[d] = rq_base[d - 1] + count[d - 1]
  free = slots.copy()
  return dur, mem, free, rq_base, status


@njit(cache=True)
def _release_successors(i, now, succ_ptr, succ, pending, dev, rank, rq_t, rq_k,
                        rq_base, rq_size):
  """Op i finished: its successors have one predecessor fewer to wait for."""
  for n in range(succ_ptr[i], succ_ptr[i + 1]):
    j = succ[n]
    pending[j] -= 1
    if pending[j] == 0:
      _make_ready(j, now, dev, rank, rq_t, rq_k, rq_base, rq_size)


@njit(cache=True)
def _ref_arrays(m, num_entries):
  """Zeroed reference-count and transfer-plan arrays."""
  return (np.zeros(m, np.int64), np.empty(num_entries, np.int64),
          np.zeros(m, np.int64), np.zeros(m, np.int64),
          np.zeros(num_entries, np.int64))


@njit(cache=True)
def run_one(dev, topo, rank, succ_ptr, succ, pred_count, t_prod, t_bytes,
            c_ptr, cons, in_ptr, in_entry, entry_tensor, cost, out_bytes,
            param_bytes, lat, bw, mem_cap, slots, ctrl_ptr, ctrl_dst,
            xfer_ovh, step_ovh, overlap_lat, stop_on_oom, start, end, busy,
            peak, x_tensor, x_dst, x_start, x_end):
  """Simulates one placement `dev`.

  Fills start/end [M], busy/peak [D] and the transfer arrays [C].

  Returns:
    (step time, status, number of transfers K, bytes moved); the step time
    is the makespan plus `step_ovh`.
  """
  m = dev.shape[0]
  nd = lat.shape[0]
  dur, mem, free, rq_base, status = _init_state(dev, cost, param_bytes, slots,
                                                mem_cap, nd)
  if status != OK:
    return np.inf, status, 0, 0.0
  peak[:] = mem
  busy[:] = 0.0
  if stop_on_oom and _over(peak, mem_cap):
    return np.inf, OOM, 0, 0.0
  pending = pred_count.copy()
  src_ref, entry_x, x_first, x_count, copy_ref = _ref_arrays(m, cons.shape[0])
  nx = plan_transfers(dev, t_prod, t_bytes, c_ptr, cons, m, nd, pending,
                      src_ref, entry_x, x_tensor, x_dst, x_first, x_count,
                      copy_ref)
  if _any_positive(xfer_ovh):
    add_transfer_overheads(dur, dev, rank, t_prod, cons, entry_x, x_tensor,
                           x_dst, nx, ctrl_ptr, ctrl_dst, xfer_ovh)
  rq_t, rq_k, rq_size = np.empty(m), np.empty(m, np.int64), np.zeros(nd, np.int64)
  ev_t = np.empty(m + nx + 1, np.float64)
  ev_k = np.empty(m + nx + 1, np.int64)
  link_free = np.zeros((nd, nd), np.float64)
  for i in range(m):
    if pending[i] == 0:
      _make_ready(i, 0.0, dev, rank, rq_t, rq_k, rq_base, rq_size)
  ev_size = _dispatch(0.0, topo, dev, dur, out_bytes, free, rq_t, rq_k,
                      rq_base, rq_size, start, end, busy, mem, peak, ev_t,
                      ev_k, 0)
  done = 0
  moved = 0.0
  step = 0.0
  while ev_size > 0:
    now = ev_t[0]
    while ev_size > 0 and ev_t[0] == now:
      _, key, ev_size = heap_pop(ev_t, ev_k, 0, ev_size)
      if key >= m:
        _on_transfer_done(key - m, now, dev, rank, t_prod, out_bytes, c_ptr,
                          cons, entry_x, x_tensor, src_ref, pending, mem,
                          rq_t, rq_k, rq_base, rq_size)
        continue
      done += 1
      step = now
      free[dev[key]] += 1
      ev_size, sent = _send_outputs(key, now, dev, t_bytes, x_tensor, x_dst,
                                    x_first, x_count, lat, bw, overlap_lat,
                                    link_free,
                                    x_start, x_end, mem, peak, ev_t, ev_k,
                                    ev_size, m)
      moved += sent
      _release_inputs(key, dev, out_bytes, t_prod, t_bytes, in_ptr, in_entry,
                      entry_tensor, entry_x, x_dst, src_ref, copy_ref, mem)
      _release_successors(key, now, succ_ptr, succ, pending, dev, rank, rq_t,
                          rq_k, rq_base, rq_size)
    if stop_on_oom and _over(peak, mem_cap):
      return np.inf, OOM, nx, moved
    ev_size = _dispatch(now, topo, dev, dur, out_bytes, free, rq_t, rq_k,
                        rq_base, rq_size, start, end, busy, mem, peak, ev_t,
                        ev_k, ev_size)
  if done != m:
    return np.inf, DEADLOCK, nx, moved
  if _over(peak, mem_cap):
    return np.inf, OOM, nx, moved
  return step + step_ovh, OK, nx, moved


@njit(cache=True)
def run_batch(devs, topo, rank, succ_ptr, succ, pred_count, t_prod, t_bytes,
              c_ptr, cons, in_ptr, in_entry, entry_tensor, cost, out_bytes,
              param_bytes, lat, bw, mem_cap, slots, ctrl_ptr, ctrl_dst,
              xfer_ovh, step_ovh, overlap_lat):
  """Step time per row of `devs` [B, M]; inf where infeasible."""
  b, m = devs.shape
  nd = lat.shape[0]
  nc = cons.shape[0]
  out = np.empty(b, np.float64)
  start = np.empty(m, np.float64)
  end = np.empty(m, np.float64)
  busy = np.empty(nd, np.float64)
  peak = np.empty(nd, np.float64)
  x_tensor = np.empty(nc, np.int64)
  x_dst = np.empty(nc, np.int64)
  x_start = np.empty(nc, np.float64)
  x_end = np.empty(nc, np.float64)
  for r in range(b):
    step, _, _, _ = run_one(
        devs[r], topo, rank, succ_ptr, succ, pred_count, t_prod, t_bytes,
        c_ptr, cons, in_ptr, in_entry, entry_tensor, cost, out_bytes,
        param_bytes, lat, bw, mem_cap, slots, ctrl_ptr, ctrl_dst, xfer_ovh,
        step_ovh, overlap_lat, True, start, end, busy, peak, x_tensor, x_dst,
        x_start, x_end)
    out[r] = step
  return out
