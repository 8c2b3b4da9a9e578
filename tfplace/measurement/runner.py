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

Faults: on a server cluster a `HealthMonitor` checks every worker while
steps run (`tfplace.measurement.health`); a worker that dies ends the
measurement at once with a `WorkerDiedError` naming it and keeping the steps
timed so far (TF itself would wait for it until the run's deadline, then
again in `Session.close()`). Each `Session.run` has a deadline
(`MeasureConfig.step_timeout_s`); other transient failures (unavailable,
deadline exceeded, aborted) are retried once, keeping the timed steps. A
run that still fails or passes its deadline raises `MeasureError`.
"""

import dataclasses
import os
import statistics
import threading
from typing import Dict, List, Optional, Sequence, Set, Tuple

from absl import logging

from tfplace.cost.cluster import Cluster
from tfplace.device_names import canonical_device
from tfplace.errors import MeasureError, WorkerDiedError
from tfplace.graph.op_graph import OpGraph, StepFetches
from tfplace.io_utils import atomic_write
from tfplace.measurement.config import MeasureConfig
from tfplace.measurement.feeds import FeedOptions, StepInputs, resolve_inputs
from tfplace.measurement.graph_inputs import step_fetches
from tfplace.measurement.health import DeadTask, HealthMonitor
from tfplace.measurement.local_cluster import (JOB, check_reachable,
                                               profiler_addresses_for,
                                               workers_for)
from tfplace.measurement.local_devices import cpu_bytes_held, local_cpus_for
from tfplace.measurement.server_tasks import check_served_tasks
from tfplace.measurement.session import (Deadline, StepSession,
                                         TransientRunError, adopt_background)
# The result types live in `timing`; they are importable from here too.
from tfplace.measurement.timing import (STEP_STATS_FILE, DeviceMismatch,  # noqa: F401
                                        OpRecord, StepTiming,
                                        device_mismatches,
                                        loop_op_records,
                                        memory_unrecorded, op_records,
                                        peak_memory, save_timing,
                                        timing_from_steps, without_held)
from tfplace.placement import Placement, placed_graph_def

# Seconds the watchdog waits past a run's deadline before giving up on it.
WATCHDOG_GRACE_S = 10.0


# ---- checks before running ---------------------------------------------


def check_target(placement: Placement, config: MeasureConfig) -> int:
  """Logical CPUs to give an in-process session (1 on a server target).

  Raises:
    MeasureError: the placement's devices do not fit the target, or a
      server of the target's cluster does not answer.
  """
  if not config.remote:  # Its GPUs must be this machine's.
    return local_cpus_for(placement.devices.values())
  local = sorted(d for d in set(placement.devices.values())
                 if d.startswith("/job:localhost/"))
  if local:
    raise MeasureError(
        f"the placement uses in-process devices (e.g. {local[0]}) but the "
        f"target {config.target} is a server cluster, whose devices are "
        "/job:worker/replica:0/task:I/device:CPU:0")
  _check_tasks(placement, config)
  return 1


def _check_tasks(placement: Placement, config: MeasureConfig) -> None:
  """Raises MeasureError if the placement names a job or task the target's
  known workers lack (TF said so only after the session had opened, in a
  long "Cannot assign a device for operation ..." error)."""
  workers = config.workers or tuple(workers_for(config.target)[0])
  if not workers:
    return  # A lone server: its cluster is not known here.
  tasks = tuple(f"/job:{JOB}/replica:0/task:{i}/" for i in range(len(workers)))
  outside = sorted(d for d in set(placement.devices.values())
                   if not d.startswith(tasks))
  if outside:
    raise MeasureError(
        f"the placement puts ops on {outside[0]}"
        f"{f' (and {len(outside) - 1} other device(s))' if outside[1:] else ''}"
        f", which the target {config.target} lacks: its {len(workers)} "
        f"worker(s) are /job:{JOB}/replica:0/task:0 to task:"
        f"{len(workers) - 1}; place on the target's own cluster")


# Worker lists whose servers said they are those tasks, in this process.
_SERVED: Set[Tuple[str, ...]] = set()


def check_served(config: MeasureConfig) -> None:
  """Asks each server of the caller's `config.workers` which task it is
  (`server_tasks.check_served_tasks`, ~20 ms per server), once per list
  and process: a list in another order than the servers' own spec would
  name their liveness and profiles by the wrong task. A `LocalCluster`
  of this process started its servers from its own list: not asked.

  Raises:
    MeasureError: address i is not task i of its servers' cluster, the
      cluster has another number of tasks, or a server does not answer.
  """
  workers = config.workers
  if (not workers or workers in _SERVED
      or list(workers) == workers_for(config.target)[0]):
    return
  check_served_tasks(workers, source="MeasureConfig.workers")
  _SERVED.add(workers)


def _check_servers(monitor: HealthMonitor, config: MeasureConfig) -> None:
  """Before anything runs: raises WorkerDiedError naming a dead worker of a
  known cluster, or MeasureError if a lone target does not answer."""
  if monitor.addresses == [config.target.replace("grpc://", "")]:
    check_reachable([config.target])
  _raise_if_dead(monitor, [], config)


def _monitor(config: MeasureConfig, wake: threading.Event
             ) -> Optional[HealthMonitor]:
  """The health monitor of a server target's workers (None in process)."""
  if not config.remote:
    return None
  addresses, processes = workers_for(config.target)
  if config.workers:
    addresses, processes = list(config.workers), (
        processes if list(config.workers) == addresses else [])
  if not addresses:
    addresses = [config.target.replace("grpc://", "")]
  return HealthMonitor(addresses, processes, config.health_interval_s,
                       died=wake)


# ---- measuring ------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _RunSpec:
  """One measurement: the placed graph, what a step runs, and how."""
  graph_def: object
  fetches: StepFetches
  config: MeasureConfig
  num_cpu_devices: int
  deadline: Deadline
  trace_dir: Optional[str]
  profiler_addresses: Tuple[str, ...] = ()
  inputs: StepInputs = StepInputs()


@dataclasses.dataclass(frozen=True)
class _RunResult:
  """What `_run` returns besides the timed steps."""
  metadata: object
  profile_error: Optional[str]
  loss: Optional[float]


def measure(graph: OpGraph, placement: Placement,
            config: Optional[MeasureConfig] = None, *,
            cluster: Optional[Cluster] = None,
            trace_dir: Optional[str] = None,
            profiler_addresses: Optional[Sequence[str]] = None,
            feeds=None,
            feed_options: Optional[FeedOptions] = None) -> StepTiming:
  """Times real training steps of `graph` placed by `placement`.

  Args:
    graph: the training step.
    placement: op -> device; validated against `graph` (and `cluster`).
    config: target, warmup and timed steps, deadlines (`MeasureConfig()` if
      None: in process, 2 warmup and 10 timed steps).
    cluster: optional cluster the placement must fit (only validated).
    trace_dir: if given, a TF profiler trace of the traced step and its
      `step_stats.pb` are written there.
    profiler_addresses: on a server target, the "host:port" profiler servers
      to capture the trace from (one per worker, in task order; on other
      hosts `trace_dir` must be a path they share). None: those of the
      running `LocalCluster` with this target, else the target's own server
      (task 0).
    feeds: values for the graph's placeholders: a mapping name -> array, an
      input function `run index -> mapping`, or `StepInputs`; placeholders
      not fed get synthetic values (see `tfplace.measurement.feeds`).
    feed_options: how synthetic values are made (batch size, shapes of
      unknown dimensions, ranges of integer inputs).

  Returns:
    The step time statistics, op records, device check, last loss and
    where each input came from (`StepTiming.inputs`).

  Raises:
    FeedError: a feed does not fit the graph, or an input cannot be made.
    MeasureError: the run failed, timed out or a server was unreachable.
  """
  config = config or MeasureConfig()
  if trace_dir and os.path.isfile(trace_dir):
    raise MeasureError(f"trace_dir {trace_dir} is a file; give a folder")
  graph_def = placed_graph_def(graph, placement, cluster)
  fetches = step_fetches(graph)
  inputs = resolve_inputs(graph, feeds, feed_options, fetches)
  cpus = check_target(placement, config)
  spec = _RunSpec(
      graph_def=graph_def, fetches=fetches, config=config,
      num_cpu_devices=cpus, deadline=Deadline(config), trace_dir=trace_dir,
      profiler_addresses=_profilers(config.target, profiler_addresses),
      inputs=inputs)
  collected: List[float] = []
  wake = threading.Event()
  monitor = _monitor(config, wake)
  if monitor:
    _check_servers(monitor, config)
    check_served(config)
    monitor.start()
  # In process the session's CPUs share the allocator with this process's
  # own tensors (an imported Keras model's weights): left out of the peak.
  held = 0 if config.remote else cpu_bytes_held()
  try:
    result = _with_retry(spec, collected, monitor, wake)
  finally:
    if monitor:
      monitor.stop()
  stats = result.metadata.step_stats
  records = op_records(stats, graph)
  loops = loop_op_records(stats, graph)
  mismatches = device_mismatches(records, placement)
  peaks = without_held(peak_memory(stats), held)
  placed = {canonical_device(d) for d in placement.devices.values()}
  return timing_from_steps(
      collected, op_records=tuple(records), loop_records=tuple(loops),
      devices_match=not mismatches,
      mismatches=tuple(mismatches), trace_path=trace_dir,
      target=config.target, profile_error=result.profile_error,
      loss=result.loss, inputs=inputs.sources, peak_memory_bytes=peaks,
      process_cpu_bytes=held,
      memory_unrecorded=memory_unrecorded(stats, placed, peaks))


def _profilers(target: str,
               addresses: Optional[Sequence[str]]) -> Tuple[str, ...]:
  """The profiler servers to capture from ("" target: none, in process)."""
  if not target:
    return ()
  if addresses is None:
    addresses = profiler_addresses_for(target) or (
        target.replace("grpc://", ""),)
  return tuple(a.replace("grpc://", "") for a in addresses)


def _with_retry(spec: _RunSpec, collected: List[float],
                monitor: Optional[HealthMonitor],
                wake: threading.Event) -> _RunResult:
  """`_watched`, once more after a transient failure unless a worker died."""
  try:
    return _watched(spec, collected, monitor, wake)
  except TransientRunError as e:
    first = str(e)
    _raise_if_dead(monitor, collected, spec.config, first)
  logging.warning("measurement failed (%s); retrying once, keeping %d "
                  "timed step(s)", first, len(collected))
  try:
    return _watched(spec, collected, monitor, wake)
  except TransientRunError as e:
    _raise_if_dead(monitor, collected, spec.config, str(e))
    raise MeasureError(f"measurement failed twice: first {first}; then {e}; "
                       f"{_kept(collected, spec.config)}") from None


def _raise_if_dead(monitor: Optional[HealthMonitor], collected: List[float],
                   config: MeasureConfig, cause: str = "") -> None:
  """Raises WorkerDiedError if the monitor found (or finds now) a dead
  worker."""
  dead = (monitor.dead or monitor.check_now()) if monitor else []
  if dead:
    raise _died(dead, collected, config, cause)


def _died(dead: Sequence[DeadTask], collected: List[float],
          config: MeasureConfig, cause: str = "") -> WorkerDiedError:
  steps = list(collected)
  detail = f" (the run reported {cause})" if cause else ""
  return WorkerDiedError(
      f"{'; '.join(map(str, dead))}: the worker died during the "
      f"measurement{detail}; {_kept(steps, config)}",
      dead_tasks=[str(d) for d in dead], step_times_s=steps)


def _kept(collected: Sequence[float], config: MeasureConfig) -> str:
  """What was timed before a failure, for its message."""
  if not collected:
    return "no step had been timed"
  t = timing_from_steps(collected)
  return (f"{len(collected)} of {config.steps} timed steps were done "
          f"(median {t.median_step_time_s * 1e3:.3f} ms, min "
          f"{t.min_step_time_s * 1e3:.3f} ms, max "
          f"{t.max_step_time_s * 1e3:.3f} ms)")


def _watched(spec: _RunSpec, collected: List[float],
             monitor: Optional[HealthMonitor],
             wake: threading.Event) -> _RunResult:
  """`_run` in a thread, watched: a dead worker (the monitor sets `wake`)
  or a run that ignores its deadline (a hung RPC; WATCHDOG_GRACE_S after
  the deadline) ends the wait at once with an error. The stuck thread is
  left behind (daemon); its runs end at their own deadlines."""
  box: Dict[str, object] = {}

  def target():
    try:
      box["result"] = _run(spec, collected)
    except BaseException as e:  # pylint: disable=broad-except
      box["error"] = e
    finally:
      wake.set()

  wake.clear()
  if monitor and monitor.dead:
    raise _died(monitor.dead, collected, spec.config)
  thread = threading.Thread(target=target, daemon=True, name="tfplace-measure")
  thread.start()
  wake.wait(max(0.0, spec.deadline.left_s()) + WATCHDOG_GRACE_S)
  if not box:  # the run is left behind: its runs end at their deadlines
    adopt_background(thread, 2 * spec.config.step_timeout_s + 5.0)
  if monitor and monitor.dead:
    raise _died(monitor.dead, collected, spec.config)
  if not box:
    raise MeasureError(f"the run did not return within its deadline plus "
                       f"{WATCHDOG_GRACE_S:.0f} s (a worker hangs?); "
                       f"{_kept(collected, spec.config)}")
  if "error" in box:
    raise box["error"]
  return box["result"]


def _run(spec: _RunSpec, collected: List[float]) -> _RunResult:
  """Opens a session; runs init, warmup, timed and traced steps. A retry
  (some steps already `collected`) warms up with one step only; a step that
  reads an input pipeline gets at least one untimed step (the fill)."""
  warmup = spec.config.warmup if not collected else 1
  if spec.inputs.fill_step:
    warmup = max(warmup, 1)
  with StepSession(spec.graph_def, spec.fetches, config=spec.config,
                   num_cpu_devices=spec.num_cpu_devices,
                   deadline=spec.deadline, inputs=spec.inputs) as session:
    session.initialize()
    for _ in range(warmup):
      session.step()
    while len(collected) < spec.config.steps:
      collected.append(session.step().seconds)
    return _traced_step(session, spec, statistics.median(collected))


def _traced_step(session: StepSession, spec: _RunSpec,
                 step_s: float) -> _RunResult:
  """One FULL_TRACE step (its step_stats); with a trace_dir, one more step
  under the TF profiler (the two cannot trace the same run)."""
  traced = session.step(trace=True)
  if not spec.trace_dir:
    return _RunResult(traced.run_metadata, None, traced.loss)
  os.makedirs(spec.trace_dir, exist_ok=True)
  atomic_write(os.path.join(spec.trace_dir, STEP_STATS_FILE),
               traced.run_metadata.step_stats.SerializeToString())
  if spec.profiler_addresses:
    from tfplace.measurement import remote_profile
    error = remote_profile.capture_remote(
        session.step, spec.profiler_addresses, spec.trace_dir, step_s,
        time_left_s=spec.deadline.left_s())
  else:
    error = _profiled_step(session, spec.trace_dir)
  if error:
    logging.warning("no complete TF profiler trace in %s: %s (the "
                    "step_stats.pb trace is there)", spec.trace_dir, error)
  return _RunResult(traced.run_metadata, error, traced.loss)


def _profiled_step(session: StepSession, trace_dir: str) -> Optional[str]:
  """Runs one step under `tf.profiler` in this process (an .xplane.pb under
  trace_dir); returns why there is no profile, or None."""
  import tensorflow as tf
  try:
    tf.profiler.experimental.start(trace_dir)
  except (tf.errors.OpError, RuntimeError) as e:
    return f"TF profiler not started: {e}"
  try:
    session.step()
  finally:
    tf.profiler.experimental.stop()
  return None
