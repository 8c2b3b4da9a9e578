"""The one step runner: a TF1 Session that runs a (placed) training step.

`StepSession` imports a GraphDef into a fresh `tf.Graph` and opens a
`tf.compat.v1.Session` on it, in process on n logical CPU devices or on the
`grpc://` target of a TF server cluster, with soft placement off (a device
that cannot run an op is an error) and graph rewrites off (grappler's
meta-optimizer, constant folding, common subexpressions, function inlining),
so that the node names in the step stats are the GraphDef's and every op runs
where it was placed. It runs the init ops, then steps (untimed, timed or
traced with FULL_TRACE), each `Session.run` under a deadline
(`MeasureConfig.step_timeout_s`, capped by what is left of `timeout_s`).

Inputs (`StepInputs`, see `feeds`): every run is fed the step's
placeholder values (built before the run's clock starts); after the init ops
the input pipelines' initializers run (`MakeIterator`, lookup tables), and
the enqueue ops of the TF1 queues the step reads run in background threads
(as TF1's QueueRunner does) until the session closes.

Its two users: `run_training_step` (init + n steps: tests and the importers'
round trips) and `tfplace.measurement.runner.measure` (warmup, timed, traced
and profiled steps).

A failed run on a dead server can leave TensorFlow calls waiting for their
deadlines in background threads (`run_in_background`, `adopt_background`);
at exit the process waits for them, so that none returns into a finalizing
interpreter (which aborts the process).
"""

import atexit
import contextlib
import dataclasses
import threading
import time
from typing import Callable, Dict, List, Optional, Tuple

from absl import logging

from tfplace.device_names import canonical_device
from tfplace.errors import ClusterError, MeasureError
from tfplace.graph.op_graph import StepFetches
from tfplace.measurement.config import MeasureConfig
from tfplace.measurement.feeds import StepInputs
from tfplace.measurement.timing import op_records

# Lines of a TF error message that say nothing about the cause.
_NOISE_PREFIXES = ("Graph execution error:", "[[", "Additional GRPC error",
                   "Detected at node", "Node: '", "File \"")


# Threads left running TensorFlow calls against a server that died (a run
# waiting for its deadline, a close waiting for a dead worker), with the
# monotonic time by which each must have ended. The process must not finish
# while one of them can still return into Python: CPython ends such a daemon
# thread with pthread_exit inside TensorFlow's C++ frames, and the process
# aborts ("FATAL: exception not rethrown").
_BACKGROUND: List[Tuple[threading.Thread, float]] = []
_BACKGROUND_LOCK = threading.Lock()


def adopt_background(thread: threading.Thread, bound_s: float) -> None:
  """Tracks a thread left inside TensorFlow calls that end within
  `bound_s` seconds (their deadlines)."""
  with _BACKGROUND_LOCK:
    _BACKGROUND.append((thread, time.monotonic() + bound_s))


def run_in_background(target: Callable[[], None], name: str,
                      bound_s: float) -> threading.Thread:
  """Runs `target` in a tracked daemon thread (see `adopt_background`)."""
  thread = threading.Thread(target=target, daemon=True, name=name)
  thread.start()
  adopt_background(thread, bound_s)
  return thread


def background_calls() -> int:
  """How many tracked threads are still inside TensorFlow calls."""
  with _BACKGROUND_LOCK:
    _BACKGROUND[:] = [(t, end) for t, end in _BACKGROUND if t.is_alive()]
    return len(_BACKGROUND)


def wait_for_background(timeout_s: Optional[float] = None) -> bool:
  """Waits for the tracked threads (each at most until its own bound, all
  at most `timeout_s`); True if none is left."""
  with _BACKGROUND_LOCK:
    pending = list(_BACKGROUND)
  give_up = None if timeout_s is None else time.monotonic() + timeout_s
  for thread, end in pending:
    until = end if give_up is None else min(end, give_up)
    thread.join(max(0.0, until - time.monotonic()))
  return background_calls() == 0


@atexit.register
def _wait_for_background_at_exit() -> None:
  """At exit, lets the tracked TF calls reach their deadlines first."""
  if wait_for_background(timeout_s=1.0):
    return
  with _BACKGROUND_LOCK:
    longest = max(end for _, end in _BACKGROUND) - time.monotonic()
  logging.warning("waiting up to %.0f s for TensorFlow call(s) to a dead TF "
                  "server to give up (MeasureConfig.step_timeout_s)",
                  max(0.0, longest))
  wait_for_background()


class TransientRunError(MeasureError):
  """A failure worth one retry: a worker unavailable, a deadline passed, a
  step aborted or cancelled."""


@dataclasses.dataclass(frozen=True)
class StepRun:
  """The outcome of `run_training_step`.

  Attributes:
    loss: the loss value of the last step (None when no loss is known).
    devices_by_op: op name -> device it ran on (traced runs only).
    run_metadata: the RunMetadata of the last step (traced runs), or None.
  """
  loss: Optional[float]
  devices_by_op: Dict[str, str]
  run_metadata: object = None


@dataclasses.dataclass(frozen=True)
class StepResult:
  """One step run by `StepSession.step`.

  Attributes:
    seconds: wall time of the `Session.run` call.
    loss: the fetched loss (None when the step fetches none).
    run_metadata: the RunMetadata of a traced step, else None.
  """
  seconds: float
  loss: Optional[float]
  run_metadata: object = None


def session_config(num_cpu_devices: int = 1, remote: bool = False,
                   timeout_s: Optional[float] = None):
  """A ConfigProto for placed graphs.

  Args:
    num_cpu_devices: logical CPU devices of an in-process session (which
      also sees every GPU of this machine).
    remote: for a server target: no local device count, and variables
      isolated per session (each measurement starts from fresh state).
    timeout_s: default deadline of every blocking call of the session
      (runs without their own deadline, and `close()`); None: no deadline.
  """
  import tensorflow as tf
  config = tf.compat.v1.ConfigProto(allow_soft_placement=False)
  if remote:
    config.isolate_session_state = True
  else:
    config.device_count["CPU"] = max(1, int(num_cpu_devices))
    # GPU memory as the graph needs it, not all of it up front.
    config.gpu_options.allow_growth = True
  config.graph_options.rewrite_options.disable_meta_optimizer = True
  options = config.graph_options.optimizer_options
  options.opt_level = tf.compat.v1.OptimizerOptions.L0
  options.do_constant_folding = False
  options.do_common_subexpression_elimination = False
  options.do_function_inlining = False
  if timeout_s is not None:
    config.operation_timeout_in_ms = int(timeout_s * 1000)
  return config


def first_line(error: Exception) -> str:
  """The informative part of a TF error message (one line, at most 400
  characters): no "Graph execution error:" header, no Python traceback of
  where the node was made (indented lines), no "[[node]]" trailer or "====="
  rulers."""
  text = getattr(error, "message", None) or str(error)
  lines: List[str] = []
  for raw in text.splitlines():
    line = raw.strip()
    if (not line or raw[:1].isspace() or "=====" in line
        or line.startswith(_NOISE_PREFIXES)):
      continue
    lines.append(line)
  return " ".join(lines[:2])[:400] or type(error).__name__


@contextlib.contextmanager
def tf_errors(what: str = "the step"):
  """Turns TensorFlow run errors into tfplace errors: transient ones
  (unavailable, deadline exceeded, aborted, cancelled) into
  `TransientRunError`, others into `MeasureError`."""
  import tensorflow as tf
  transient = (tf.errors.UnavailableError, tf.errors.DeadlineExceededError,
               tf.errors.AbortedError, tf.errors.CancelledError)
  try:
    yield
  except tf.errors.OutOfRangeError as e:
    raise MeasureError(
        f"{what} failed: the input pipeline ran out of data "
        f"({first_line(e)}); repeat the dataset (dataset.repeat()) or time "
        "fewer steps") from None
  except transient as e:
    raise TransientRunError(f"{type(e).__name__}: {first_line(e)}") from None
  except tf.errors.OpError as e:
    raise MeasureError(f"{what} failed: {type(e).__name__}: "
                       f"{first_line(e)}") from None
  except (ValueError, KeyError, TypeError) as e:
    raise MeasureError(f"{what} cannot run: {e}") from None


class Deadline:
  """The deadline of a measurement and of each run inside it."""

  def __init__(self, config: MeasureConfig):
    self.end = time.monotonic() + config.timeout_s
    self.step_timeout_s = config.step_timeout_s

  def left_s(self) -> float:
    return self.end - time.monotonic()

  def run_timeout_ms(self) -> int:
    """Milliseconds the next run may take.

    Raises:
      TransientRunError: the measurement's deadline has passed.
    """
    left = self.left_s()
    if left <= 0:
      raise TransientRunError("the measurement deadline passed")
    return max(1, int(min(self.step_timeout_s, left) * 1000))


def import_graph_def(graph_def):
  """A fresh tf.Graph holding `graph_def` (or a MetaGraphDef's graph).

  Raises:
    MeasureError: TensorFlow cannot import it.
  """
  import tensorflow as tf
  if hasattr(graph_def, "graph_def"):
    graph_def = graph_def.graph_def
  graph = tf.Graph()
  with graph.as_default():
    try:
      tf.compat.v1.import_graph_def(graph_def, name="")
    except (ValueError, TypeError, tf.errors.OpError) as e:
      raise MeasureError(f"cannot import the graph to run it: "
                         f"{first_line(e)}") from None
  return graph


class StepSession:
  """A Session on one (placed) training step: init once, then steps.

  Use as a context manager; `close()` never raises (a failure to close, e.g.
  on a cluster whose worker died, is logged).
  """

  def __init__(self, graph_def, fetches: StepFetches, *,
               config: MeasureConfig = MeasureConfig(),
               num_cpu_devices: int = 1,
               deadline: Optional[Deadline] = None,
               inputs: Optional[StepInputs] = None):
    """Describes the session; `open()` (or `with`) creates it.

    Args:
      graph_def: a (placed) GraphDef, or a MetaGraphDef.
      fetches: train ops (run), loss (fetched) and init ops (run once).
      config: target and deadlines (warmup and steps are the caller's).
      num_cpu_devices: logical CPU devices of an in-process session.
      deadline: the measurement's deadline, shared with a retry (default: a
        new one from `config`).
      inputs: feeds and input pipelines (None: the graph makes its own
        inputs).
    """
    self.graph_def = graph_def
    self.fetches = fetches
    self.config = config
    self.num_cpu_devices = num_cpu_devices
    self.deadline = deadline or Deadline(config)
    self.inputs = inputs or StepInputs()
    self.session = None
    self.runs = 0  # Session.run calls so far (the input function's index)
    self._queues: Optional[_QueueFiller] = None
    self._run_list = ([fetches.loss] if fetches.loss else []) + list(
        fetches.train_ops)

  def __enter__(self) -> "StepSession":
    return self.open()

  def __exit__(self, exc_type, *exc) -> None:
    if exc_type is not None and issubclass(exc_type, TransientRunError):
      # A worker may be gone: closing can wait for it until the session's
      # operation timeout, so the caller does not wait for the close.
      run_in_background(self.close, "tfplace-session-close",
                        self.config.step_timeout_s + 5.0)
    else:
      self.close()

  def open(self) -> "StepSession":
    """Imports the graph and creates the session (no run yet)."""
    import tensorflow as tf
    graph = import_graph_def(self.graph_def)
    close_ops = _add_queue_close_ops(graph, self.inputs.pipelines.queues)
    config = session_config(self.num_cpu_devices, self.config.remote,
                            self.config.step_timeout_s)
    with tf_errors("opening the session"):
      self.session = tf.compat.v1.Session(self.config.target, graph=graph,
                                          config=config)
    if self.inputs.pipelines.enqueue_ops:
      self._queues = _QueueFiller(self, close_ops)
    return self

  def run_options(self, trace: bool = False, partition_graphs: bool = False):
    """RunOptions with the run's deadline (and FULL_TRACE if `trace`; the
    graphs each device ran, `RunMetadata.partition_graphs`, if
    `partition_graphs`)."""
    import tensorflow as tf
    level = (tf.compat.v1.RunOptions.FULL_TRACE if trace
             else tf.compat.v1.RunOptions.NO_TRACE)
    return tf.compat.v1.RunOptions(
        trace_level=level, timeout_in_ms=self.deadline.run_timeout_ms(),
        output_partition_graphs=partition_graphs)

  def feed_dict(self) -> Dict[str, object]:
    """The feeds of the next run (counts the run)."""
    feeds = self.inputs.feed_dict(self.runs)
    self.runs += 1
    return feeds

  def initialize(self) -> None:
    """Runs the init ops, then the input pipelines' initializers, then
    starts filling the queues the step reads (all before any step)."""
    for ops, what in ((self.fetches.init_ops, "initialization"),
                      (self.inputs.pipelines.init_ops,
                       "initializing the input pipelines")):
      if ops:
        with tf_errors(what):
          self.session.run(list(ops), feed_dict=self.feed_dict(),
                           options=self.run_options())
    if self._queues:
      self._queues.start()

  def step(self, trace: bool = False,
           partition_graphs: bool = False) -> StepResult:
    """Runs one training step; its wall time excludes building options.
    `trace` and `partition_graphs`: as `run_options`, in the result's
    `run_metadata`."""
    import tensorflow as tf
    metadata = (tf.compat.v1.RunMetadata() if trace or partition_graphs
                else None)
    feeds = self.feed_dict()
    options = self.run_options(trace, partition_graphs)
    with tf_errors():
      start = time.perf_counter()
      values = self.session.run(self._run_list, feed_dict=feeds,
                                options=options, run_metadata=metadata)
      seconds = time.perf_counter() - start
    loss = float(values[0]) if self.fetches.loss else None
    return StepResult(seconds=seconds, loss=loss, run_metadata=metadata)

  def close(self) -> None:
    """Closes the session; a failure is logged, never raised."""
    if self.session is None:
      return
    if self._queues:
      self._queues.stop()
    session, self.session = self.session, None
    try:
      session.close()
    except Exception as e:  # pylint: disable=broad-except  (TF status errors)
      logging.warning("closing the session failed (%s: %s); a worker may "
                      "have died", type(e).__name__, first_line(e))


def _add_queue_close_ops(graph, queues) -> List[str]:
  """Adds a close op (cancelling pending enqueues) next to each queue, so
  the enqueue threads can be stopped; returns their names."""
  import tensorflow as tf
  names = []
  with graph.as_default():
    for queue in queues:
      handle = graph.get_operation_by_name(queue).outputs[0]
      with tf.device(handle.op.device):
        close = tf.raw_ops.QueueCloseV2(handle=handle,
                                        cancel_pending_enqueues=True,
                                        name=f"{queue}/tfplace_close")
      names.append(close.name)
  return names


class _QueueFiller:
  """Runs each enqueue op of the step's queues in a loop in its own thread
  (what TF1's QueueRunner does) until `stop()` closes the queues."""

  def __init__(self, owner: StepSession, close_ops: List[str]):
    self.owner = owner
    self.close_ops = close_ops
    self.stopping = threading.Event()
    self.threads: List[threading.Thread] = []
    self.errors: List[str] = []

  def start(self) -> None:
    for op in self.owner.inputs.pipelines.enqueue_ops:
      thread = threading.Thread(target=self._loop, args=(op,), daemon=True,
                                name=f"tfplace-enqueue-{op}")
      thread.start()
      self.threads.append(thread)

  def _loop(self, op: str) -> None:
    import tensorflow as tf
    session = self.owner.session
    while not self.stopping.is_set():
      try:
        session.run(op, feed_dict=self.owner.inputs.feed_dict(0),
                    options=self.owner.run_options())
      except (tf.errors.CancelledError, tf.errors.OutOfRangeError,
              tf.errors.AbortedError):
        return  # the queue was closed
      except Exception as e:  # pylint: disable=broad-except
        if not self.stopping.is_set():
          self.errors.append(f"{op}: {first_line(e)}")
          logging.warning("enqueue op %s failed: %s", op, first_line(e))
        return

  def stop(self) -> None:
    self.stopping.set()
    try:
      self.owner.session.run(self.close_ops, options=self.owner.run_options())
    except Exception as e:  # pylint: disable=broad-except
      logging.warning("closing the input queues failed: %s", first_line(e))
    for thread in self.threads:
      thread.join(timeout=5.0)


def run_training_step(graph_def, fetches: StepFetches, *,
                      num_cpu_devices: int = 1, target: str = "",
                      steps: int = 1, trace: bool = False) -> StepRun:
  """Runs the init ops once, then `steps` training steps.

  Args:
    graph_def: a (placed) GraphDef, or a MetaGraphDef.
    fetches: train ops, loss and init ops.
    num_cpu_devices: logical CPU devices the local session exposes.
    target: a session target (e.g. "grpc://host:port" of a
      `tf.distribute.Server`); "" for in-process.
    steps: training steps to run.
    trace: trace the last step (FULL_TRACE) to record devices used.

  Returns:
    A `StepRun`.

  Raises:
    MeasureError: TensorFlow could not place or run the graph.
  """
  config = MeasureConfig(target=target, steps=max(1, steps))
  result = None
  with StepSession(graph_def, fetches, config=config,
                   num_cpu_devices=num_cpu_devices) as session:
    session.initialize()
    for i in range(steps):
      result = session.step(trace=trace and i == steps - 1)
  loss = result.loss if result else None
  metadata = result.run_metadata if result else None
  devices = devices_used(metadata) if metadata is not None else {}
  logging.info("ran %d step(s): loss %s, %d ops traced", steps, loss,
               len(devices))
  return StepRun(loss=loss, devices_by_op=devices, run_metadata=metadata)


def devices_used(run_metadata) -> Dict[str, str]:
  """Op name -> full device string, from a traced RunMetadata's step stats.

  Runtime-inserted nodes (_SOURCE, _SINK, _Send/_Recv, "x/ctrl/_12") are
  left out.
  """
  out: Dict[str, str] = {}
  for record in op_records(run_metadata.step_stats):
    try:
      out[record.name] = canonical_device(record.device)
    except ClusterError:
      continue
  return out
