"""Real step times of a placement: timed `Session.run` steps and op records.

`measure` imports the placed GraphDef into a fresh `tf.Graph`, opens a TF1
`Session` (in process with logical CPU devices, or on a `grpc://` target of a
TF server cluster), runs the graph's init ops, `warmup` untimed steps and
`steps` timed steps (no tracing), then one extra step with
`RunOptions(trace_level=FULL_TRACE)` whose `RunMetadata.step_stats` gives the
op records (device, start, duration) and the devices ops actually ran on.
Grappler's meta-optimizer and graph-level constant folding are off, so the
executed node names are the graph's op names.

With a `trace_dir`, the FULL_TRACE step's `step_stats.pb` is written there,
then one more step runs under the TF profiler: in process with
`tf.profiler.experimental.start/stop`; on a server cluster the ops run in the
worker processes, so the client asks each worker's profiler server for its
timeline (`tf.profiler.experimental.client.trace`, in a thread while the step
runs), giving `trace_dir/plugins/profile/<run>/<host>_<port>.xplane.pb`, one
per worker. A failed or incomplete capture is logged and reported in
`StepTiming.profile_error`; it never fails the measurement.

A run that fails or passes its deadline raises `MeasureError`; transient
failures (worker unavailable, deadline exceeded, aborted) are retried once,
keeping the step times measured before the failure.
"""

import dataclasses
import json
import os
import socket
import statistics
import threading
import time
from typing import Dict, List, Optional, Sequence, Tuple

from absl import logging
import numpy as np

from tfplace.cost.cluster import Cluster
from tfplace.errors import MeasureError
from tfplace.graph.op_graph import OpGraph
from tfplace.io_utils import atomic_write
from tfplace.measurement import session
from tfplace.placement import Placement, placed_graph_def

# The traced step's step stats in a trace directory (read by tfplace.trace).
STEP_STATS_FILE = "step_stats.pb"
# Seconds the watchdog waits past a run's deadline before giving up on it.
WATCHDOG_GRACE_S = 10.0
# Nodes TF adds at run time; never graph ops.
_RUNTIME_PREFIXES = ("_SOURCE", "_SINK", "_retval", "_arg", "_Recv", "_Send",
                     "_HostRecv", "_HostSend")


@dataclasses.dataclass(frozen=True)
class OpRecord:
  """One op execution from the traced step.

  Attributes:
    name: node name.
    device: full device string it ran on.
    start_s: start, seconds after the first op of the step started.
    duration_s: wall time from start to end of all its work.
  """
  name: str
  device: str
  start_s: float
  duration_s: float


@dataclasses.dataclass(frozen=True)
class DeviceMismatch:
  """An op that ran somewhere other than where the placement put it."""
  op: str
  placed: str
  ran: str


@dataclasses.dataclass(frozen=True)
class StepTiming:
  """Measured step times of one placement.

  Attributes:
    median_step_time_s: median of the timed steps.
    min_step_time_s: fastest timed step.
    max_step_time_s: slowest timed step.
    stdev_s: sample standard deviation (0 for one step).
    iqr_s: interquartile range of the timed steps.
    step_times_s: every timed step, in order.
    op_records: graph ops of the traced step (runtime nodes left out).
    devices_match: True if every traced graph op ran on its placed device.
    mismatches: the ops that did not.
    trace_path: directory with the profiler trace and step_stats.pb, if any.
    target: the session target ("" for in process).
    profile_error: why the TF profiler trace is missing or incomplete (None
      when it was captured, or not asked for).
  """
  median_step_time_s: float
  min_step_time_s: float
  max_step_time_s: float
  stdev_s: float
  iqr_s: float
  step_times_s: Tuple[float, ...]
  op_records: Tuple[OpRecord, ...] = ()
  devices_match: bool = True
  mismatches: Tuple[DeviceMismatch, ...] = ()
  trace_path: Optional[str] = None
  target: str = ""
  profile_error: Optional[str] = None

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)

  @classmethod
  def from_dict(cls, data: dict) -> "StepTiming":
    data = dict(data)
    data["step_times_s"] = tuple(data["step_times_s"])
    data["op_records"] = tuple(OpRecord(**r) for r in data.get("op_records", ()))
    data["mismatches"] = tuple(
        DeviceMismatch(**m) for m in data.get("mismatches", ()))
    return cls(**data)


def timing_from_steps(step_times: Sequence[float], **fields) -> StepTiming:
  """Builds a `StepTiming` with the statistics of `step_times`."""
  t = np.asarray(step_times, dtype=np.float64)
  if t.size == 0:
    raise MeasureError("no step was timed")
  q1, q3 = np.percentile(t, [25, 75])
  return StepTiming(
      median_step_time_s=float(np.median(t)), min_step_time_s=float(t.min()),
      max_step_time_s=float(t.max()),
      stdev_s=float(statistics.stdev(t)) if t.size > 1 else 0.0,
      iqr_s=float(q3 - q1), step_times_s=tuple(float(x) for x in t), **fields)


# ---- session set-up -------------------------------------------------------


def session_config(num_cpu_devices: int = 1, remote: bool = False,
                   timeout_s: float = 300.0):
  """`session.session_config` (no rewrites, no soft placement) plus an
  operation timeout and, on a server target, session-isolated variables."""
  config = session.session_config(max(1, int(num_cpu_devices)))
  if remote:
    del config.device_count["CPU"]
    config.isolate_session_state = True
  config.operation_timeout_in_ms = int(timeout_s * 1000)
  config.graph_options.optimizer_options.do_function_inlining = False
  return config


def num_local_cpus(placement: Placement) -> int:
  """Logical CPU devices an in-process session needs for `placement`."""
  import tensorflow as tf
  count = 1
  for name in set(placement.devices.values()):
    spec = tf.DeviceSpec.from_string(name)
    if spec.job not in (None, "localhost") or spec.task not in (None, 0):
      raise MeasureError(
          f"device {name} is not a local device; pass --target or "
          "--local_workers to measure on a server cluster")
    if (spec.device_type or "").upper() != "CPU":
      raise MeasureError(f"device {name}: only CPU devices can be measured "
                         "in process on this machine")
    count = max(count, (spec.device_index or 0) + 1)
  return count


def check_reachable(addresses: Sequence[str], timeout_s: float = 2.0) -> None:
  """Raises MeasureError unless each "host:port" accepts a TCP connection."""
  for address in addresses:
    host, _, port = address.replace("grpc://", "").rpartition(":")
    try:
      socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except (OSError, ValueError) as e:
      raise MeasureError(
          f"TF server {address} is not reachable: {e}; is the server running "
          "(`tfplace cluster up`, or tf.distribute.Server on that host) and "
          "the address right?") from None


def step_targets(graph: OpGraph) -> Tuple[List[str], List[str]]:
  """(run targets of one step, init ops) from the graph's fetches.

  With no train ops and no loss, every op without consumers is run.
  """
  fetches = graph.fetches
  targets = list(fetches.train_ops) + ([fetches.loss] if fetches.loss else [])
  if not targets:
    ptr, _ = graph.successors_csr
    targets = [op.name for i, op in enumerate(graph.ops)
               if ptr[i + 1] == ptr[i]]
  init = list(fetches.init_ops)
  if not init and "init" in graph.index:
    init = ["init"]
  return targets, init


# ---- measuring ------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _RunSpec:
  graph_def: object
  targets: Tuple[str, ...]
  init_ops: Tuple[str, ...]
  target: str
  config: object
  warmup: int
  steps: int
  deadline: float
  trace_dir: Optional[str]
  profiler_addresses: Tuple[str, ...] = ()


def measure(graph: OpGraph, placement: Placement, *,
            cluster: Optional[Cluster] = None, target: str = "",
            warmup: int = 2, steps: int = 10,
            trace_dir: Optional[str] = None,
            timeout_s: float = 300.0,
            profiler_addresses: Optional[Sequence[str]] = None) -> StepTiming:
  """Times real training steps of `graph` placed by `placement`.

  Args:
    graph: the training step.
    placement: op -> device; validated against `graph` (and `cluster`).
    cluster: optional cluster the placement must fit (only validated).
    target: session target, e.g. "grpc://127.0.0.1:2222"; "" runs in
      process on as many logical CPU devices as the placement names.
    warmup: untimed steps after initialization.
    steps: timed steps (no tracing).
    trace_dir: if given, a TF profiler trace of the traced step and its
      `step_stats.pb` are written there.
    timeout_s: deadline for the whole measurement (each run gets what is left).
    profiler_addresses: on a server target, the "host:port" profiler servers
      to capture the trace from (one per worker, in task order; on other
      hosts `trace_dir` must be a path they share). None: those of the
      running `LocalCluster` with this target, else the target's own server
      (task 0).

  Returns:
    The step time statistics, op records and device check.

  Raises:
    MeasureError: the run failed, timed out or a server was unreachable.
  """
  if steps < 1 or warmup < 0:
    raise MeasureError("steps must be >= 1 and warmup >= 0")
  graph_def = placed_graph_def(graph, placement, cluster)
  remote = bool(target)
  if remote:
    local = sorted(d for d in set(placement.devices.values())
                   if d.startswith("/job:localhost/"))
    if local:
      raise MeasureError(
          f"the placement uses in-process devices (e.g. {local[0]}) but the "
          f"target {target} is a server cluster, whose devices are "
          "/job:worker/replica:0/task:I/device:CPU:0")
    check_reachable([target])
  cpus = 1 if remote else num_local_cpus(placement)
  targets, init = step_targets(graph)
  spec = _RunSpec(
      graph_def=graph_def, targets=tuple(targets),
      init_ops=tuple(init), target=target,
      config=session_config(cpus, remote, timeout_s), warmup=warmup,
      steps=steps, deadline=time.monotonic() + timeout_s, trace_dir=trace_dir,
      profiler_addresses=_profilers(target, profiler_addresses))
  collected: List[float] = []
  try:
    metadata, profile_error = _watched(spec, collected)
  except _Transient as e:
    logging.warning("measurement failed (%s); retrying once, keeping %d "
                    "timed step(s)", e, len(collected))
    try:
      metadata, profile_error = _watched(spec, collected)
    except _Transient as e2:
      raise MeasureError(f"measurement failed twice: first {e}; then "
                         f"{e2}") from None
  records = op_records(metadata.step_stats, graph)
  mismatches = device_mismatches(records, placement)
  return timing_from_steps(
      collected, op_records=tuple(records), devices_match=not mismatches,
      mismatches=tuple(mismatches), trace_path=trace_dir, target=target,
      profile_error=profile_error)


def _profilers(target: str,
               addresses: Optional[Sequence[str]]) -> Tuple[str, ...]:
  """The profiler servers to capture from ("" target: none, in process)."""
  if not target:
    return ()
  if addresses is None:
    from tfplace.measurement.local_cluster import profiler_addresses_for
    addresses = profiler_addresses_for(target) or (
        target.replace("grpc://", ""),)
  return tuple(a.replace("grpc://", "") for a in addresses)


class _Transient(MeasureError):
  """A failure worth one retry (unavailable worker, deadline, abort)."""


def _watched(spec: _RunSpec, collected: List[float]):
  """`_run` in a watchdog thread: if TensorFlow ignores its own deadline
  (a hung RPC), the caller still gets a MeasureError, WATCHDOG_GRACE_S after
  the deadline; the stuck thread is left behind (daemon)."""
  box: Dict[str, object] = {}

  def target():
    try:
      box["result"] = _run(spec, collected)
    except BaseException as e:  # pylint: disable=broad-except
      box["error"] = e

  thread = threading.Thread(target=target, daemon=True, name="tfplace-measure")
  thread.start()
  thread.join(max(0.0, spec.deadline - time.monotonic()) + WATCHDOG_GRACE_S)
  if thread.is_alive():
    raise MeasureError(f"the run did not return within its deadline plus "
                       f"{WATCHDOG_GRACE_S:.0f} s (a worker hangs?); "
                       f"{len(collected)} step(s) were timed")
  if "error" in box:
    raise box["error"]
  return box["result"]


def _run_options(spec: _RunSpec, trace: bool = False):
  import tensorflow as tf
  left_ms = int((spec.deadline - time.monotonic()) * 1000)
  if left_ms <= 0:
    raise _Transient("the measurement deadline passed")
  level = (tf.compat.v1.RunOptions.FULL_TRACE if trace
           else tf.compat.v1.RunOptions.NO_TRACE)
  return tf.compat.v1.RunOptions(trace_level=level, timeout_in_ms=left_ms)


def _run(spec: _RunSpec, collected: List[float]):
  """Opens a session, runs init/warmup/timed/traced steps.

  Returns:
    (RunMetadata of the traced step, profile error or None).
  """
  import tensorflow as tf
  tf_graph = tf.Graph()
  with tf_graph.as_default():
    tf.graph_util.import_graph_def(spec.graph_def, name="")
  session = tf.compat.v1.Session(spec.target, graph=tf_graph,
                                 config=spec.config)
  try:
    if spec.init_ops:
      session.run(list(spec.init_ops), options=_run_options(spec))
    for _ in range(spec.warmup if not collected else 1):
      session.run(list(spec.targets), options=_run_options(spec))
    while len(collected) < spec.steps:
      options = _run_options(spec)
      start = time.perf_counter()
      session.run(list(spec.targets), options=options)
      collected.append(time.perf_counter() - start)
    return _traced_step(session, spec, statistics.median(collected))
  except (tf.errors.UnavailableError, tf.errors.DeadlineExceededError,
          tf.errors.AbortedError, tf.errors.CancelledError) as e:
    raise _Transient(f"{type(e).__name__}: {_first_line(e)}") from None
  except tf.errors.OpError as e:
    raise MeasureError(f"the step failed: {type(e).__name__}: "
                       f"{_first_line(e)}") from None
  finally:
    session.close()


def _first_line(error: Exception) -> str:
  text = getattr(error, "message", None) or str(error)
  lines = [l.strip() for l in text.splitlines() if l.strip() and "=====" not in l]
  return " ".join(lines[:3])[:400]


def _traced_step(session, spec: _RunSpec, step_s: float):
  """One FULL_TRACE step (its step_stats); with a trace_dir, one more step
  under the TF profiler (the two cannot trace the same run).

  Returns:
    (RunMetadata of the FULL_TRACE step, profile error or None).
  """
  import tensorflow as tf
  metadata = tf.compat.v1.RunMetadata()
  session.run(list(spec.targets), options=_run_options(spec, trace=True),
              run_metadata=metadata)
  if not spec.trace_dir:
    return metadata, None
  os.makedirs(spec.trace_dir, exist_ok=True)
  atomic_write(os.path.join(spec.trace_dir, STEP_STATS_FILE),
               metadata.step_stats.SerializeToString())
  if spec.profiler_addresses:
    from tfplace.measurement import remote_profile
    error = remote_profile.capture_remote(
        lambda: session.run(list(spec.targets), options=_run_options(spec)),
        spec.profiler_addresses, spec.trace_dir, step_s,
        time_left_s=spec.deadline - time.monotonic())
  else:
    error = _profiled_step(session, spec)
  if error:
    logging.warning("no complete TF profiler trace in %s: %s (the "
                    "step_stats.pb trace is there)", spec.trace_dir, error)
  return metadata, error


def _profiled_step(session, spec: _RunSpec) -> Optional[str]:
  """Runs one step under `tf.profiler` in this process (an .xplane.pb under
  trace_dir); returns why there is no profile, or None."""
  import tensorflow as tf
  try:
    tf.profiler.experimental.start(spec.trace_dir)
  except (tf.errors.OpError, RuntimeError) as e:
    return f"TF profiler not started: {e}"
  try:
    session.run(list(spec.targets), options=_run_options(spec))
  finally:
    tf.profiler.experimental.stop()
  return None


def op_records(step_stats, graph: Optional[OpGraph] = None) -> List[OpRecord]:
  """Graph op executions in `step_stats`, times relative to the step start.

  A node listed on several dev_stats entries (the master and the worker of a
  remote task) is kept once, with its longest duration.
  """
  raw: Dict[Tuple[str, str], Tuple[int, int]] = {}
  for dev in step_stats.dev_stats:
    device = _device_name(dev.device)
    for node in dev.node_stats:
      name = node.node_name.split(":")[0]
      if name.startswith(_RUNTIME_PREFIXES):
        continue
      if graph is not None and name not in graph.index:
        continue
      key = (name, device)
      start, dur = node.all_start_micros, node.all_end_rel_micros
      if key not in raw or dur > raw[key][1]:
        raw[key] = (start, dur)
  if not raw:
    return []
  t0 = min(s for s, _ in raw.values())
  out = [OpRecord(name=n, device=d, start_s=(s - t0) * 1e-6,
                  duration_s=max(0, dur) * 1e-6)
         for (n, d), (s, dur) in raw.items()]
  return sorted(out, key=lambda r: (r.start_s, r.name))


def _device_name(name: str) -> str:
  # Strip suffixes such as "/stream:all" or ":memcpy" some runtimes add.
  parts = name.split("/")
  keep = [p for p in parts if not p.startswith("stream:")]
  return "/".join(keep).split(" ")[0]


def device_mismatches(records: Sequence[OpRecord],
                      placement: Placement) -> List[DeviceMismatch]:
  """Ops whose traced device differs from the placed device."""
  import tensorflow as tf
  out = []
  for r in records:
    placed = placement.devices.get(r.name)
    if placed is None:
      continue
    a, b = tf.DeviceSpec.from_string(placed), tf.DeviceSpec.from_string(r.device)
    same = ((a.job or "localhost") == (b.job or "localhost")
            and (a.task or 0) == (b.task or 0)
            and (a.device_type or "").upper() == (b.device_type or "").upper()
            and (a.device_index or 0) == (b.device_index or 0))
    if not same:
      out.append(DeviceMismatch(op=r.name, placed=placed, ran=r.device))
  return out


def save_timing(timing: StepTiming, path: str) -> None:
  """Writes a StepTiming as JSON (atomically)."""
  atomic_write(path, json.dumps(timing.to_dict(), indent=1))
