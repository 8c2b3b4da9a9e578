"""The compiled core of the discrete-event simulator (numba, arrays only).

`simulator.Simulator` prepares the arrays (`kernel_state` describes them);
this module runs the events. All functions are `@njit(cache=True)`.

Speed (measured on Inception-V3, 11,282 ops, k80x4): the event loop is one
function. numba passes every array argument of a call that LLVM does not
inline as ~7 words on the stack (~650 bytes per call here), which cost more
than the events themselves; so the per-event work is written out in
`_event_loop` rather than in helpers (the exception to the house rule on
function length). The ready queues are FIFOs (ready times never decrease),
not heaps. See `scripts/bench_simulator.py`.

Status codes returned: 0 ok, 1 out of memory (only when stopping early),
2 an op has no kernel on its device (infinite cost), 3 deadlock (a cycle),
4 an op ended at the instant it started while `strict` (the caller asked to
be told: a simulation restricted to the training step is exact only when
every op takes time; see `Simulator`).
"""

import numpy as np
from numba import njit, prange

from tfplace.simulator.kernel_state import (CUR, FETCH, HEAD, TAIL,
                                            UNSORTED, any_positive,
                                            add_transfer_overheads,
                                            first_ready, init_state,
                                            max_transfers, new_work,
                                            plan_transfers)

OK, OOM, NO_KERNEL, DEADLOCK, ZERO_TIME = 0, 1, 2, 3, 4


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
# rq_ptr [4, D] rows (`kernel_state`): head, tail, cur, unsorted flag;
# rq_time [D]: the ready time of the ops from `cur` on.
# A `tf_exec` device (a one-core TF server worker) also has an inline FIFO
# (w.iq) and a stack of its own dispatches (w.stk), both taken before rq
# (`_make_ready_after`); other devices leave them empty.


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
  _sort_ranks(rq, max(rq_ptr[HEAD, d], rq_ptr[CUR, d]), rq_ptr[TAIL, d])
  rq_ptr[UNSORTED, d] = 0


# ---- the event loop -----------------------------------------------------------

@njit(cache=True)
def _make_ready(j, now, dev, rank, rq, rq_ptr, rq_time):
  """Op j has everything it waits for at time `now`: appends it to its
  device's ready queue."""
  d = dev[j]
  if rq_time[d] != now:
    if rq_ptr[UNSORTED, d]:
      _sort_pending(d, rq, rq_ptr)
    rq_time[d] = now
    rq_ptr[CUR, d] = rq_ptr[TAIL, d]
  rq[rq_ptr[TAIL, d]] = rank[j]
  rq_ptr[TAIL, d] += 1
  rq_ptr[UNSORTED, d] = 1


@njit(cache=True)
def _make_ready_after(key, s, now, g, c, w):
  """Op `key` ended on device s, a `tf_exec` device: queues its successors
  that are now ready as TF's executor does on one thread. Successors that
  take at most `c.inline_s[s]` run inline, in order; of the others, the
  last runs inline too if nothing else does, and the rest are dispatched
  to the front of the thread's queue (run last-in, first-out, as the
  step's first ops are, `first_ready`; before what other threads queued:
  arrivals, `w.rq`).
  Successors on other devices wait for their messages (`_make_ready`).
  """
  pending, dev, dur = w.pending, w.dev, w.dur
  iq, iq_ptr, stk, stk_ptr = w.iq, w.iq_ptr, w.stk, w.stk_ptr
  kept = -1
  for n in range(g.succ_ptr[key], g.succ_ptr[key + 1]):
    j = g.succ[n]
    pending[j] -= 1
    if pending[j] != 0:
      continue
    if dev[j] != s:
      _make_ready(j, now, dev, g.rank, w.rq, w.rq_ptr, w.rq_time)
      continue
    if dur[j] <= c.inline_s[s]:
      iq[iq_ptr[1, s]] = j
      iq_ptr[1, s] += 1
      continue
    if kept >= 0:
      stk[stk_ptr[1, s]] = kept
      stk_ptr[1, s] += 1
    kept = j
  if kept >= 0:
    if iq_ptr[0, s] == iq_ptr[1, s]:
      iq[iq_ptr[1, s]] = kept
      iq_ptr[1, s] += 1
    else:
      stk[stk_ptr[1, s]] = kept
      stk_ptr[1, s] += 1


@njit(cache=True)
def _over(peak, mem_cap):
  """True if some device's peak memory exceeds its capacity."""
  for d in range(peak.shape[0]):
    if peak[d] > mem_cap[d]:
      return True
  return False


@njit(cache=True)
def _append(nxt, head, tail, d, k):
  """Appends transfer k to device d's list (head/tail [D], nxt [X])."""
  nxt[k] = -1
  if head[d] < 0:
    head[d] = k
  else:
    nxt[tail[d]] = k
  tail[d] = k


@njit(cache=True)
def _serve_messages(d, ev_size, now, g, c, w):
  """Rendezvous: device d has no op running or ready, so its free slots do
  message work: first the transfers it sends (w.out_head, in the order their
  producers ended), then the arrivals it parses (w.in_head, in arrival
  order). Returns (event count, bytes sent).

  A send holds a slot of the sender for its host work (w.x_send[k] and half
  the link's host latency `c.lat_host`), then for bytes / bandwidth once
  the link is free; it frees the slot (event key m + k) and arrives the rest
  of the latency later (key m + X + k). A parse holds a slot of the
  receiver for w.x_recv[k] (key m + 2X + k), which holds the other half
  of the host latency where the arrival woke the receiver (`_event_loop`);
  the tensor's consumers are ready when it ends.
  """
  m, nx_max = g.ops.shape[0], max_transfers(g)
  free, out_head, in_head = w.free, w.out_head, w.in_head
  bw, lat, lat_host = c.bw, c.lat, c.lat_host
  link_free, mem, peak = w.link_free, w.mem, w.peak
  sent = 0.0
  while free[d] > 0 and out_head[d] >= 0:
    k = out_head[d]
    out_head[d] = w.out_next[k]
    dst = w.x_dst[k]
    nbytes = w.x_bytes[k]
    start = max(now + w.x_send[k] + lat_host[d, dst] / 2, link_free[d, dst])
    hold = nbytes / bw[d, dst]
    end = start + hold + lat[d, dst] - lat_host[d, dst]
    link_free[d, dst] = start + hold if c.overlap_lat else end
    w.x_start[k] = start
    w.x_end[k] = end
    free[d] -= 1
    w.busy[d] += start + hold - now
    mem[dst] += nbytes
    if mem[dst] > peak[dst]:
      peak[dst] = mem[dst]
    sent += nbytes
    ev_size = heap_push(w.ev_t, w.ev_k, ev_size, start + hold, m + k)
    ev_size = heap_push(w.ev_t, w.ev_k, ev_size, end, m + nx_max + k)
  while free[d] > 0 and in_head[d] >= 0:
    k = in_head[d]
    in_head[d] = w.in_next[k]
    free[d] -= 1
    parse = w.x_recv[k]
    w.busy[d] += parse
    ev_size = heap_push(w.ev_t, w.ev_k, ev_size, now + parse,
                        m + 2 * nx_max + k)
  return ev_size, sent


@njit(cache=True)
def _issue_recvs(ev_size, g, c, w):
  """Rendezvous with a Recv issue cost: each receiver starts the Recvs of
  its transfers (in transfer order) at the step start, holding a slot for
  c.recv_issue each (key m + 3X + d ends the phase; w.issue_end), and
  each request reaches its sender the link's wire latency later
  (w.x_req). The issue is part of a message's measured receive cost, so
  it is taken off the parse (not below 0).
  Returns the event count."""
  m, nx_max = g.ops.shape[0], max_transfers(g)
  dev, x_dst, issue_end = w.dev, w.x_dst, w.issue_end
  for i in range(m):
    for k in range(w.x_first[i], w.x_first[i] + w.x_count[i]):
      d, s = x_dst[k], dev[i]
      issue_end[d] += c.recv_issue[d]
      w.x_req[k] = issue_end[d] + c.lat[d, s] - c.lat_host[d, s]
      w.x_recv[k] = max(w.x_recv[k] - c.recv_issue[d], 0.0)
  for d in range(issue_end.shape[0]):
    if issue_end[d] > 0.0:
      w.free[d] -= 1
      w.busy[d] += issue_end[d]
      ev_size = heap_push(w.ev_t, w.ev_k, ev_size, issue_end[d],
                          m + 3 * nx_max + d)
  return ev_size


@njit(cache=True)
def _event_loop(g, c, w, stop_on_oom, strict):
  """Runs the events of one placement; returns (makespan, status, bytes
  moved).

  One function on purpose (see the module docstring): at each time, start
  ready ops on free devices (ZERO_TIME if one ends at once and `strict`),
  then handle every event at the next time: a transfer arrives (the source
  copy loses a reference, consumers on the destination may become ready;
  a control message, x_tensor -1, readies the producer's control
  successors there) or
  an op ends (its transfers are queued on their links, FIFO; it drops its
  references to the tensors it read; its successors wait for one op fewer).
  With `overlap_lat` a transfer holds its link for bytes / bandwidth only.
  With `rendezvous` message work is done only by a device with no op
  running or ready (`_serve_messages`, called after ops start): an op's
  transfers wait in its device's outbox and an arrival in its receiver's
  inbox, and the consumers are ready when the receiver has parsed it (on a
  one-core TF server worker, RPC work is queued behind the ops the
  executor can run: `measurement.send_delay`). With a Recv issue cost
  (c.recv_issue) each receiver first starts its Recvs (`_issue_recvs`),
  and a transfer whose producer ends before its sender was idle after the
  request came is stored: the sender answers it later without the
  latency's share (the fan-out benchmark's path); otherwise the send
  answers the waiting request (the ping-pong's path, the full share).
  """
  m = g.ops.shape[0]
  # Every array in a local: numba reference-counts each attribute read.
  topo, rank, c_ptr, cons = g.topo, g.rank, g.c_ptr, g.cons
  ctrl_ptr, ctrl_dst = g.ctrl_ptr, g.ctrl_dst
  in_ptr, in_prod, in_bytes, succ_ptr, succ = (g.in_ptr, g.in_prod,
                                               g.in_bytes, g.succ_ptr, g.succ)
  out_bytes, bw, lat, overlap_lat = c.out_bytes, c.bw, c.lat, c.overlap_lat
  scratch, graph_op, tf_exec = c.scratch, g.ops, c.tf_exec
  iq, iq_ptr, stk, stk_ptr = w.iq, w.iq_ptr, w.stk, w.stk_ptr
  dur, dev, mem, peak, busy, free = w.dur, w.dev, w.mem, w.peak, w.busy, w.free
  rq, rq_ptr, rq_time, ev_t, ev_k = w.rq, w.rq_ptr, w.rq_time, w.ev_t, w.ev_k
  pending, src_ref, copy_ref = w.pending, w.src_ref, w.copy_ref
  entry_x, in_x, x_first, x_count = w.entry_x, w.in_x, w.x_first, w.x_count
  x_dst, x_tensor, x_start, x_end = w.x_dst, w.x_tensor, w.x_start, w.x_end
  x_prod, x_bytes = w.x_prod, w.x_bytes
  start_t, end_t, link_free = w.start, w.end, w.link_free
  done, ev_size, moved, step, now = 0, 0, 0.0, 0.0, 0.0
  rendezvous, running = c.rendezvous, w.running
  out_next, out_head, out_tail = w.out_next, w.out_head, w.out_tail
  in_next, in_head, in_tail = w.in_next, w.in_head, w.in_tail
  nx_max = max_transfers(g)
  issue = rendezvous and np.any(c.recv_issue > 0.0)
  last_idle, x_req = w.last_idle, w.x_req
  if issue:
    ev_size = _issue_recvs(ev_size, g, c, w)
  while True:
    for d in range(free.shape[0]):  # Start ready ops.
      if free[d] > 0 and rq_ptr[UNSORTED, d]:
        _sort_pending(d, rq, rq_ptr)
      while free[d] > 0:
        if iq_ptr[0, d] < iq_ptr[1, d]:  # TF's executor: inline first,
          i = iq[iq_ptr[0, d]]
          iq_ptr[0, d] += 1
        elif stk_ptr[1, d] > stk_ptr[0, d]:  # then its own dispatches,
          stk_ptr[1, d] -= 1
          i = stk[stk_ptr[1, d]]
        elif rq_ptr[HEAD, d] < rq_ptr[TAIL, d]:  # then the rest, in order.
          i = topo[rq[rq_ptr[HEAD, d]]]
          rq_ptr[HEAD, d] += 1
        else:
          break
        free[d] -= 1
        running[d] += 1
        start_t[i] = now
        end_t[i] = now + dur[i]
        if strict and end_t[i] == start_t[i]:
          return np.inf, ZERO_TIME, moved
        busy[d] += dur[i]
        mem[d] += out_bytes[i] + scratch[graph_op[i], d]
        if mem[d] > peak[d]:
          peak[d] = mem[d]
        ev_size = heap_push(ev_t, ev_k, ev_size, end_t[i], i)
      idle = (running[d] == 0 and rq_ptr[HEAD, d] == rq_ptr[TAIL, d]
              and iq_ptr[0, d] == iq_ptr[1, d]
              and stk_ptr[1, d] == stk_ptr[0, d])
      if issue and now >= w.issue_end[d] and idle:
        last_idle[d] = now
      if (rendezvous and free[d] > 0 and idle
          and (out_head[d] >= 0 or in_head[d] >= 0)):
        ev_size, sent = _serve_messages(d, ev_size, now, g, c, w)
        moved += sent
    if ev_size == 0:
      break
    now = ev_t[0]
    while ev_size > 0 and ev_t[0] == now:
      _, key, ev_size = heap_pop(ev_t, ev_k, ev_size)
      if key >= m + 3 * nx_max:  # A Recv issue phase ended.
        free[key - m - 3 * nx_max] += 1
        continue
      if key >= m:  # A transfer event.
        k = key - m
        if k < nx_max:  # Rendezvous transfer k frees its sender's slot.
          free[dev[x_prod[k]]] += 1
          continue
        k -= nx_max
        if rendezvous and k < nx_max:  # Arrived: into the inbox.
          # It wakes the receiver if it finds it asleep: no op running or
          # ready, no slot held by message work, no arrival waiting to be
          # parsed. Waking costs the receiver's half of the link's host
          # latency (the ping-pong benchmark's hop: each message wakes its
          # receiver); an arrival that finds the worker awake costs only
          # its parse (100 scalars from one one-core worker into another
          # measured ~30 us each, the fan-out benchmark's per-message cost,
          # where charging every parse its half of the ~45 us latency
          # predicted 2x that). Inline: a call per event costs numba's
          # reference counting of every array passed.
          d = x_dst[k]
          if (free[d] > 0 and in_head[d] < 0 and running[d] == 0
              and rq_ptr[HEAD, d] == rq_ptr[TAIL, d]
              and iq_ptr[0, d] == iq_ptr[1, d]
              and stk_ptr[1, d] == stk_ptr[0, d]):
            w.x_recv[k] += c.lat_host[dev[x_prod[k]], d] / 2
          _append(in_next, in_head, in_tail, d, k)
          continue
        if rendezvous:  # Parsed: the receiver's slot is free again.
          k -= nx_max
          free[x_dst[k]] += 1
        t = x_tensor[k]
        p = x_prod[k]
        if t == FETCH:  # The client has the loss: the step may end now.
          mem[x_dst[k]] -= x_bytes[k]
          step = max(step, now)
          continue
        if t < 0:  # A control message: p's successors there may start.
          for n in range(ctrl_ptr[p], ctrl_ptr[p + 1]):
            j = ctrl_dst[n]
            if dev[j] == x_dst[k]:
              pending[j] -= 1
              if pending[j] == 0:
                _make_ready(j, now, dev, rank, rq, rq_ptr, rq_time)
          continue
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
      running[s] -= 1
      mem[s] -= scratch[graph_op[key], s]
      sent = 0.0
      for k in range(x_first[key], x_first[key] + x_count[key]):
        if rendezvous:  # Sent when s has nothing to run.
          if issue and last_idle[s] < x_req[k]:  # Stored before asked.
            w.x_send[k] -= c.lat_host[s, x_dst[k]] / 2
          _append(out_next, out_head, out_tail, s, k)
          continue
        d = x_dst[k]
        nbytes = x_bytes[k]
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
        ev_size = heap_push(ev_t, ev_k, ev_size, end, m + nx_max + k)
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
      if tf_exec[s]:
        _make_ready_after(key, s, now, g, c, w)
        continue
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
def run_one(dev_all, g, c, w, stop_on_oom, strict, t_repl, host, fetch_op,
            fetch_bytes, client):
  """Simulates one placement `dev_all` [M] in `w`; t_repl to client: the
  constant copies and the fetch (`kernel_state`).

  Fills w.start/end [m], w.busy/peak [D] and the transfer arrays. With
  `strict`, stops with ZERO_TIME as soon as an op ends when it starts.

  Returns:
    (step time, status, number of transfers K, bytes moved); the step time
    is the makespan plus `c.step_ovh`.
  """
  nd = c.slots.shape[0]
  if not init_state(dev_all, g, c, w):
    w.busy[:] = 0.0
    w.peak[:] = 0.0
    return np.inf, NO_KERNEL, 0, 0.0
  w.busy[:] = 0.0
  w.peak[:] = w.mem
  if stop_on_oom and _over(w.peak, c.mem_cap):
    return np.inf, OOM, 0, 0.0
  nx = plan_transfers(g, w, c.rendezvous, t_repl, host, fetch_op,
                      fetch_bytes, client)
  if any_positive(c.xfer_ovh) or any_positive(c.xfer_byte):
    add_transfer_overheads(g, w, nx, c.xfer_ovh, c.xfer_byte, c.rendezvous)
  first_ready(g, c, w)
  step, status, moved = _event_loop(g, c, w, stop_on_oom, strict)
  if status != OK:
    return np.inf, status, nx, moved
  return step + c.step_ovh, OK, nx, moved


@njit(cache=True)
def _run_rows(devs, rows, g, c, strict, out, codes, extra):
  """Simulates devs[rows] with one `Work`, stopping early on OOM; `extra`:
  `run_one`'s last five arguments (constant copies, fetch)."""
  w = new_work(g.ops.shape[0], g.cons.shape[0], max_transfers(g),
               c.slots.shape[0])
  for r in rows:
    out[r], codes[r], _, _ = run_one(devs[r], g, c, w, True, strict, *extra)


@njit(cache=True)
def run_batch(devs, g, c, strict, extra):
  """Step time per row of `devs` [B, M] (inf where infeasible) and the
  status of each row (ZERO_TIME rows need the unrestricted graph)."""
  b = devs.shape[0]
  out = np.empty(b, np.float64)
  codes = np.zeros(b, np.int64)
  _run_rows(devs, np.arange(b), g, c, strict, out, codes, extra)
  return out, codes


@njit(cache=True, parallel=True)
def run_batch_parallel(devs, g, c, strict, num_chunks, extra):
  """`run_batch` with the rows split into `num_chunks` chunks run on
  numba's thread pool (one `Work` per chunk)."""
  b = devs.shape[0]
  out = np.empty(b, np.float64)
  codes = np.zeros(b, np.int64)
  for chunk in prange(num_chunks):
    rows = np.arange(chunk, b, num_chunks)
    _run_rows(devs, rows, g, c, strict, out, codes, extra)
  return out, codes
