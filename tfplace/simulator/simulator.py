"""The fast discrete-event simulator: predicted step time of a placement.

Semantics (one training step):
  * Each device runs at most `slots` ops at once (1 for a GPU). Ready ops
    start in the order they became ready; ties go to the earlier op in the
    graph's topological order. Except on a one-core CPU of a rendezvous
    cluster (a TF server worker), which orders them as TF's executor does
    on one thread (`kernel._make_ready_after`): an op's successors that
    take at most `INLINE_WORK_S` beyond the launch overhead run next, in
    order, then its last expensive one; the step's first ops and the
    other expensive successors are dispatched to the front of the worker's
    queue (last in, first out), arrivals queue behind them. The one-core
    worker thus runs depth first: RNNLM's upper LSTM layer's whole
    backward pass before the lower one's (traced), which frees its 35
    per-step weight gradients first: measured peak 1.45 GB; simulated 1.38
    GB in this order, 2.37 GB in order of readiness.
  * An op is ready when all its predecessors (data and control edges) are done
    and every input tensor produced on another device has arrived.
  * A tensor needed on another device is sent once per destination device,
    when its producer finishes. Except where TF's runtime sends nothing
    (checked against its partition graphs, `scripts/message_count.py`: the
    same count on 99 of 99 split placements of 11 graphs on two TF server
    workers; 7 of 79 of 9 graphs before, the fetched loss left out): a
    small constant (at most 16 elements) on a CPU read on two hosts or
    more is copied to each CPU that reads it (`replicated_constants`), and
    a TF2 loop's accumulators whose loop output nothing reads are pruned
    (`dead_accumulators`). On a server cluster
    (`Cluster.rendezvous_transfers`) the fetched loss also goes from its
    worker to the first CPU (task 0's, where the client reads it), and the
    step ends when it is there. A transfer occupies the directed link
    src->dst for `latency + bytes / bandwidth`; each link carries one
    transfer at a time, first come first served. Transfers overlap
    compute. With `Cluster.overlap_latency` a transfer holds its link for
    `bytes / bandwidth` only and arrives `latency` after that (many RPCs
    in flight at once, as in TF's gRPC runtime).
  * With `Cluster.rendezvous_transfers` (one-core TF server workers) a
    device does message work only when it has no op running or ready: TF's
    worker queues RPC work (a RecvTensor request, the consumers of a
    received tensor) on its one-thread pool behind the ops its executor
    can run, so a message waits while either end computes
    (`tfplace.measurement.send_delay`: a scalar behind a 3.85 ms chain of
    adds on its sender arrives 4.47 ms after its producer; 0.31 ms between
    idle workers; also when the receiver's request was already waiting).
    A transfer whose producer ended waits in its device's outbox; the
    device, once idle, sends it, holding a slot for its host cost and
    bytes / bandwidth; it arrives into the receiver's inbox, and the idle
    receiver parses it, holding a slot, before its consumers are ready.
    On a "loopback" link (gRPC between processes of one host) there is no
    wire: the latency the ping-pong benchmark measures is system calls and
    thread wake-ups, half charged to the sender's slot and half to the
    receiver's (`Cluster.host_latency`); judged on the twenty-two cross
    records this met the error target on 119 of 154 graph-runs, 105 with
    the sender's next op first and both ends held (WORKSPACE_NOTES.md,
    issue 13). The receiver pays its half only where the arrival wakes
    it (`kernel._event_loop`: nothing running, ready or being parsed); in a
    stream of arrivals only the first does (since 2026-11-29: 60 cross
    records, error target 298 -> 305 of 422 graph-runs).
    With a measured Recv issue cost (`Device.recv_issue_s`) each receiver
    first starts the Recvs of its transfers, holding a slot for that long
    per Recv at the step start (a one-core TF worker starts every Recv of
    its part of the step before its ops; profiled: 13-25 us each), and
    that cost is taken off each parse (the measured per-message cost held
    it). A tensor whose producer ends before its sender was idle after the
    request came is stored and answered later without the latency's share
    (the fan-out's path); a send that answers a waiting request pays it
    (the ping-pong's path): profiled, 0.5 us and 50-90 us `_Send`s.
  * Memory per device: parameters (`OpCosts.param_bytes`; the analytical
    model's include constants' tensors, which TF's kernels hold for the
    session's life) are resident all step. An op's outputs
    (`OpCosts.output_bytes`) are allocated when it starts and freed when
    its last local consumer has finished and all its outgoing transfers
    are done (at once if nothing reads them). A received
    copy is allocated on the destination when the transfer starts and freed
    when its last consumer there has finished. A device whose peak exceeds
    its `memory_bytes` makes the placement infeasible. The analytical
    model's output bytes (`OpGraph.activation_bytes`) leave out outputs that
    are a variable's own buffer and round each allocation up as TF's BFC
    allocator does. An op's scratch (`OpCosts.scratch_bytes`, kernel
    workspace: a CPU convolution gradient's patch buffer of up to 30 MiB,
    `tfplace.cost.scratch`) is held on its device from its start to its
    end. Measured on 2 one-core TF server workers (7 graphs x 4 placers,
    `scripts/memory_fidelity.py`, WORKSPACE_NOTES.md "Memory"), each
    device's peak came out at a median 1.13x the simulated one (0.89-1.52x;
    the excess mostly TF's allocator handing out whole chunks).
  * An op placed on a device whose type has no kernel (infinite cost) makes
    the placement infeasible too.
  * Host cost of transfers (`Device.transfer_overhead_s`, default 0): in
    TF's distributed runtime each cross-device tensor costs CPU work on both
    ends (serialization, RecvTensor handling) that blocks a single-core
    worker's compute. Each transfer (one per tensor and remote device)
    lengthens its producer's execution by the sender's overhead (so the
    transfer starts that much later) and the execution of the tensor's first
    consumer (topological order) on the destination by the receiver's
    overhead; with `Cluster.rendezvous_transfers` the two ends instead
    pay as they send and parse (above). A tensor read by several ops on
    one remote device is paid for once per end. With `Device.transfer_byte_s` each end also pays that
    many seconds per byte of the tensor (copies through the RPC layer).
    TF's graph partitioner turns a cross-device control edge
    into a Send/Recv of a dummy tensor: control edges from one op to ops on
    another device cost one such message (host overhead on both ends, charged
    the same way; no link time, so with zero overheads a control edge only
    orders). With `Cluster.rendezvous_transfers` that message is a transfer
    of 0 bytes like any other (sent, carried and parsed as above):
    between TF server workers it is an RPC, and the traced gap from a
    control predecessor's end to its successor's start on the other worker
    was 90-230 us (median per graph and cross record), as long as a small
    tensor's. Device busy time includes these costs.
  * Feeds: TensorFlow puts a value fed to a `Placeholder` on the client's
    device (the session's host CPU; on a server cluster the master's, task 0,
    whatever the placeholder's placement), and its consumers elsewhere receive
    it from there. So a placeholder runs on the cluster's first CPU device
    in the simulation, wherever it is placed (no CPU device: where placed).
  * Fixed cost per step (`Cluster.step_overhead_s`, default 0): added to the
    step time of every feasible placement (the schedule's times are not
    shifted; `step_time_s` = makespan + step overhead), and for each device
    the placement uses, that device's `Device.run_overhead_s` (default 0:
    the session master's call to run the device's part of the step).

The event loop is compiled with numba (`kernel.py`); `simulate_batch`
evaluates many placements in one call, which is what the learned placers use.
"""

import copy
import os
from typing import Optional, Tuple

import numba
import numpy as np
from absl import logging

from tfplace.cost.cluster import Cluster
from tfplace.cost.op_costs import OpCosts
from tfplace.errors import PlacementError
from tfplace.graph.op_graph import OpGraph
from tfplace.simulator import (kernel, kernel_arrays, kernel_state,
                               replicated_constants)
from tfplace.simulator.result import ScheduledOp, ScheduledTransfer, SimResult

# Ops whose value the client feeds (to its own device, see the module doc).
FED_OP_TYPES = ("Placeholder", "PlaceholderV2")
# Work beyond its launch overhead under which TF's executor runs an op
# inline on the thread that made it ready: 8,000 cycles
# (`kOpIsExpensiveThresholdCycles`) at ~2.5 GHz.
INLINE_WORK_S = 3.2e-6


def usable_threads() -> int:
  """The simulator threads a batch may use when asked for all
  (`num_threads=0`): the cores this process may run on, at most numba's
  pool (`NUMBA_NUM_THREADS`)."""
  try:
    cores = len(os.sched_getaffinity(0))
  except AttributeError:  # Not on Linux.
    cores = os.cpu_count() or 1
  return max(1, min(cores, numba.config.NUMBA_NUM_THREADS))


def _threads(num_threads: int, rows: int) -> int:
  """The threads a batch of `rows` placements runs on (0: all usable)."""
  return min(int(num_threads) or usable_threads(), rows,
             numba.config.NUMBA_NUM_THREADS)


class Simulator:
  """Simulates placements of one graph on one cluster with fixed op costs.

  Build it once per (graph, cluster, costs) and call `simulate` or
  `simulate_batch` many times.

  Speed: when the ops outside the training step (`OpGraph.step_mask`) cost
  nothing (no compute where they have a kernel, no output bytes, as
  `CostModel.op_costs` makes them), they cannot change any result: nothing in
  the step waits for them, they move no tensor, hold no activation memory
  and end the instant they start. The kernel then simulates the step's ops
  only (their parameters still count). That is exact as long as every
  simulated op takes time (it ends after it starts: then a zero-time op
  outside the step never takes a slot any op inside it could use at that
  instant); a placement where some op ends when it starts is simulated again
  with every op. `simulate(..., record_schedule=True)` always simulates
  every op (the schedule lists them all).
  """

  def __init__(self, graph: OpGraph, cluster: Cluster, costs: OpCosts):
    """Prepares the arrays the compiled kernel reads.

    Args:
      graph: the op graph.
      cluster: the devices and links.
      costs: per-op costs of `graph` on `cluster` ([M, D]).

    Raises:
      ValueError: if the costs do not match the graph and cluster sizes.
    """
    self.graph = graph
    self._fed = np.array([i for i, t in enumerate(graph.op_types)
                          if t in FED_OP_TYPES], dtype=np.int64)
    self._all = kernel_arrays.graph_arrays(graph)
    step = graph.step_mask
    self._step = (kernel_arrays.restrict(self._all, step)
                  if not step.all() else None)
    self._set_cluster(cluster, costs)

  def with_cluster(self, cluster: Cluster,
                   costs: Optional[OpCosts] = None) -> "Simulator":
    """This graph on another cluster (or with other costs), sharing the
    graph arrays: cheap, for searches over cluster figures.

    Args:
      cluster: the devices and links (any number of devices).
      costs: per-op costs on `cluster`; default: this simulator's.

    Raises:
      ValueError: if the costs do not match the graph and cluster sizes.
    """
    other = copy.copy(self)
    other._set_cluster(cluster, self.costs if costs is None else costs)
    return other

  def _set_cluster(self, cluster: Cluster, costs: OpCosts) -> None:
    """The arrays that depend on the cluster and the op costs."""
    m, d = self.graph.num_ops, cluster.num_devices
    if costs.compute_s.shape != (m, d):
      raise ValueError(f"costs are {costs.compute_s.shape}, expected ({m}, {d})")
    self.cluster, self.costs = cluster, costs
    self._cost = np.ascontiguousarray(costs.compute_s, dtype=np.float64)
    self._out_bytes = np.asarray(costs.output_bytes, dtype=np.float64)
    self._device_names = tuple(cluster.device_names)
    self._run_ovh = np.array([dv.run_overhead_s for dv in cluster.devices],
                             dtype=np.float64)
    cpus = [i for i, dv in enumerate(cluster.devices) if dv.type == "CPU"]
    self._feed_device = cpus[0] if cpus else -1
    self._mem_cap = np.array([dv.memory_bytes for dv in cluster.devices],
                             dtype=np.float64)
    self._fast = self._step if self._step_is_exact() else self._all
    self._kernel_args = {id(a): self._make_kernel_args(a)
                         for a in (self._all, self._fast)}
    self._works = {}

  def _step_is_exact(self) -> bool:
    """True if the ops outside the step cost nothing (see the class doc)."""
    if self._step is None:
      return False
    outside = np.ones(self.graph.num_ops, dtype=bool)
    outside[self._step.ops] = False
    compute = self._cost[outside]
    return bool(np.all((compute == 0) | ~np.isfinite(compute))
                and np.all(self._out_bytes[outside] == 0))

  def _make_kernel_args(self, arrays: kernel_arrays.GraphArrays):
    """(KernelGraph, KernelCluster, extra) of `arrays` on this cluster;
    extra: `kernel_state`'s constant copies and fetch (t_repl, host,
    fetch_op, fetch_bytes, client)."""
    cluster = self.cluster
    devices = cluster.devices
    return arrays.kernel_graph(), kernel_state.KernelCluster(
        cost=self._cost, out_bytes=self._out_bytes[arrays.ops],
        param_bytes=np.asarray(self.costs.param_bytes, dtype=np.float64),
        scratch=np.ascontiguousarray(self.costs.scratch_bytes,
                                     dtype=np.float64),
        lat=np.ascontiguousarray(cluster.link_latency, dtype=np.float64),
        bw=np.ascontiguousarray(cluster.link_bandwidth, dtype=np.float64),
        mem_cap=self._mem_cap,
        slots=np.array([dv.slots for dv in devices], dtype=np.int64),
        xfer_ovh=np.array([dv.transfer_overhead_s for dv in devices],
                          dtype=np.float64),
        xfer_byte=np.array([dv.transfer_byte_s for dv in devices],
                           dtype=np.float64),
        step_ovh=float(cluster.step_overhead_s),
        overlap_lat=bool(cluster.overlap_latency),
        rendezvous=bool(cluster.rendezvous_transfers),
        lat_host=np.ascontiguousarray(cluster.host_latency, dtype=np.float64),
        recv_issue=np.array([dv.recv_issue_s for dv in devices],
                            dtype=np.float64),
        tf_exec=np.array([bool(cluster.rendezvous_transfers) and
                          dv.type == "CPU" and dv.slots == 1
                          for dv in devices], dtype=np.bool_),
        inline_s=np.array([dv.launch_overhead_s + INLINE_WORK_S
                           for dv in devices], dtype=np.float64)), (
            arrays.t_repl, replicated_constants.host_devices(
                cluster.device_names, [dv.type for dv in devices]),
            *self._fetch(arrays))

  def _fetch(self, arrays: kernel_arrays.GraphArrays):
    """(simulated op, bytes, client device) of the fetched loss: on a
    server cluster (`Cluster.rendezvous_transfers`) the client reads it
    through task 0, its first CPU, and TF sends it there from its worker
    (seen in the partition graphs: `scripts/message_count.py`); (-1, 0,
    -1) elsewhere or without a loss."""
    none = (np.int64(-1), 0.0, np.int64(-1))
    loss = self.graph.fetches.loss
    if not (loss and self.cluster.rendezvous_transfers
            and self._feed_device >= 0):
      return none
    name, _, slot = loss.partition(":")
    i = self.graph.index.get(name)
    j = np.searchsorted(arrays.ops, i) if i is not None else len(arrays.ops)
    if j >= len(arrays.ops) or arrays.ops[j] != i:
      return none
    nbytes = self.graph.ops[i].output_bytes[int(slot or 0)]
    return np.int64(j), float(nbytes), np.int64(self._feed_device)

  def _check_ids(self, ids: np.ndarray) -> np.ndarray:
    ids = np.ascontiguousarray(ids, dtype=np.int32)
    m, d = self.graph.num_ops, self.cluster.num_devices
    if ids.shape[-1] != m:
      raise PlacementError(f"expected {m} device ids per placement, got shape "
                           f"{ids.shape}")
    if ids.size and (ids.min() < 0 or ids.max() >= d):
      raise PlacementError(f"device ids must be in [0, {d}), got "
                           f"[{ids.min()}, {ids.max()}]")
    if self._fed.size and self._feed_device >= 0:
      ids = ids.copy()
      ids[..., self._fed] = self._feed_device  # fed where the client is
    return ids

  def _run_one(self, dev: np.ndarray, arrays: kernel_arrays.GraphArrays,
               stop_on_oom: bool = False):
    """Simulates `dev` in this simulator's `Work` for `arrays` (reused by
    every call: the caller copies what it keeps); with `stop_on_oom`, an
    out-of-memory placement stops early (its schedule is incomplete)."""
    g, c, extra = self._kernel_args[id(arrays)]
    work = self._works.get(id(arrays))
    if work is None:
      work = kernel_state.new_work(arrays.num_ops, arrays.num_entries,
                                   kernel_state.max_transfers(g),
                                   self.cluster.num_devices)
      self._works[id(arrays)] = work
    step, status, nx, moved = kernel.run_one(dev, g, c, work, stop_on_oom,
                                             arrays is not self._all, *extra)
    return step, status, nx, moved, work

  def simulate(self, device_ids: np.ndarray,
               record_schedule: bool = False) -> SimResult:
    """Simulates one placement.

    Args:
      device_ids: int [M], device index (cluster order) per op.
      record_schedule: also return every op execution and transfer.

    Returns:
      The SimResult; `step_time_s` is inf and `feasible` False if a device
      runs out of memory or an op has no kernel on its device.
    """
    dev = self._check_ids(np.asarray(device_ids).reshape(-1))
    arrays = self._all if record_schedule else self._fast
    step, status, nx, moved, out = self._run_one(dev, arrays)
    if status == kernel.ZERO_TIME:
      arrays = self._all
      step, status, nx, moved, out = self._run_one(dev, arrays)
    busy, peak = out.busy.copy(), out.peak.copy()
    oom = tuple(int(i) for i in np.flatnonzero(peak > self._mem_cap))
    if status == kernel.NO_KERNEL:
      logging.warning("placement puts an op on a device without its kernel")
    elif status == kernel.DEADLOCK:
      raise PlacementError("simulation deadlocked: the graph has a cycle")
    if status == kernel.OK:
      step += float(self._run_overheads(dev[None, :])[0])
    result = SimResult(
        step_time_s=float(step) if status == kernel.OK else float("inf"),
        feasible=status == kernel.OK, device_busy_s=busy,
        peak_memory_bytes=peak.astype(np.int64), bytes_moved=int(moved),
        oom_devices=oom, num_transfers=int(nx),
        device_names=self._device_names,
        memory_capacity_bytes=self._mem_cap)
    if record_schedule and status != kernel.NO_KERNEL:
      result = _with_schedule(result, dev, out.start, out.end,
                              out.x_prod[:nx], out.x_bytes[:nx],
                              out.x_dst[:nx], out.x_start[:nx],
                              out.x_end[:nx])
    return result

  def simulate_batch(self, device_ids: np.ndarray,
                     num_threads: int = 1) -> np.ndarray:
    """Step times of a batch of placements.

    Args:
      device_ids: int [B, M].
      num_threads: with more than 1, the rows are split over that many
        threads of numba's pool (at most `numba.config.NUMBA_NUM_THREADS`);
        0: every core this process may use (`usable_threads`). The results
        are the same with any number.

    Returns:
      float64 [B]: step time per placement, inf where infeasible.
    """
    devs = self._check_ids(np.atleast_2d(device_ids))
    steps, codes = self._run_batch(devs, self._fast, num_threads)
    redo = np.flatnonzero(codes == kernel.ZERO_TIME)
    if len(redo):
      steps[redo] = self._run_batch(devs[redo], self._all, num_threads)[0]
    return steps + self._run_overheads(devs)

  def prepare_threads(self, num_threads: int) -> None:
    """Compiles (or loads from numba's cache) the parallel kernel now if
    `simulate_batch(..., num_threads)` will use it and this process has not
    yet: on a fresh install ~9 s, which a timed search should not pay
    inside its budget."""
    if (_threads(num_threads, 2) > 1
        and not kernel.run_batch_parallel.signatures):
      self.simulate_batch(np.zeros((2, self.graph.num_ops), np.int32),
                          num_threads=2)

  def _run_overheads(self, devs: np.ndarray) -> np.ndarray:
    """float64 [B]: the summed `run_overhead_s` of the devices that run
    training-step ops in each of B placements [B, M] (zeros when no device
    has one)."""
    out = np.zeros(devs.shape[0])
    if not self._run_ovh.any():
      return out
    step_devs = devs[:, self.graph.step_mask]
    for d in np.flatnonzero(self._run_ovh):
      out += self._run_ovh[d] * (step_devs == d).any(axis=1)
    return out

  def _run_batch(self, devs: np.ndarray, arrays: kernel_arrays.GraphArrays,
                 num_threads: int):
    g, c, extra = self._kernel_args[id(arrays)]
    strict = arrays is not self._all
    threads = _threads(num_threads, len(devs))
    if threads <= 1:
      return kernel.run_batch(devs, g, c, strict, extra)
    previous = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
      return kernel.run_batch_parallel(devs, g, c, strict, threads, extra)
    finally:
      numba.set_num_threads(previous)

  def simulate_batch_start_times(self, device_ids: np.ndarray
                                 ) -> Tuple[np.ndarray, np.ndarray]:
    """Step times and op start times of a batch of placements.

    What Placeto's progressive placer reads of the schedule: when each op
    starts under the current placement. Step times as `simulate_batch`;
    every op is simulated, as with `simulate(..., record_schedule=True)`,
    so the start times are those of its schedule (one row at a time: dearer
    per placement than `simulate_batch`).

    Args:
      device_ids: int [B, M].

    Returns:
      (float64 [B] step times, inf where infeasible; float64 [B, M] start
      time of each op in seconds, 0 in rows that are infeasible).
    """
    devs = self._check_ids(np.atleast_2d(device_ids))
    times, starts = np.full(len(devs), np.inf), np.zeros(devs.shape)
    for r, dev in enumerate(devs):
      step, status, _, _, work = self._run_one(dev, self._all,
                                               stop_on_oom=True)
      if status == kernel.OK:
        times[r], starts[r] = step, work.start
    return times + self._run_overheads(devs), starts


def _with_schedule(result: SimResult, dev, start, end, x_prod, x_bytes,
                   x_dst, x_start, x_end) -> SimResult:
  import dataclasses
  ops = tuple(sorted(
      (ScheduledOp(op=i, device=int(dev[i]), start_s=float(start[i]),
                   end_s=float(end[i])) for i in range(len(dev))),
      key=lambda s: (s.start_s, s.device, s.op)))
  transfers = tuple(
      ScheduledTransfer(producer=int(p), src_device=int(dev[p]),
                        dst_device=int(dst), nbytes=int(b),
                        start_s=float(s), end_s=float(e))
      for p, b, dst, s, e in zip(x_prod, x_bytes, x_dst, x_start, x_end))
  return dataclasses.replace(result, schedule=ops, transfers=transfers)

