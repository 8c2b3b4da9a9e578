"""TF profiler traces from the worker processes of a TF server cluster.

On a `tf.distribute.Server` cluster the ops run inside the worker processes,
so a profiler started in the client only sees `RunStep/Client`. Each worker
runs a profiler server instead (`tf.profiler.experimental.server.start`, see
`worker_main`; a TF server also answers profiler requests on its own port),
and the client asks all of them at once for a trace of a time window:
`tf.profiler.experimental.client.trace("grpc://h1:p1,grpc://h2:p2", logdir,
duration_ms)`. That call blocks for the window, so it runs in a thread while
the client runs the profiled step a short lead time after the request. Each
worker writes `logdir/plugins/profile/<run>/<host>_<port>.xplane.pb` (one run
directory for all of them); on several hosts `logdir` must be a path they
all share.

Beside the xplane files, `tasks.json` names each file's TF task
(`{"format": "tfplace.profile_tasks/1", "tasks": {"127.0.0.1_6009":
"/job:worker/replica:0/task:0"}}`; the profiler addresses are given in task
order), so `tfplace.trace` can show tasks instead of host:port.

A failed or incomplete capture is returned as a message, never raised: the
trace is an extra, the measurement stands without it.
"""

import glob
import json
import os
import threading
import time
from typing import Callable, Dict, Optional, Sequence, Set

from absl import logging

from tfplace.io_utils import atomic_write

# Seconds between sending the capture request and starting the step: the
# workers start tracing as they get the request (well under 0.1 s on
# loopback).
LEAD_S = 0.3
# Seconds to wait past the window for the workers' answers.
GRACE_S = 10.0
# Margin, in seconds, added to the traced window.
_MARGIN_S = 0.5
# In a profile run directory: the TF task of each worker's xplane file.
TASKS_FILE = "tasks.json"
TASKS_FORMAT = "tfplace.profile_tasks/1"


def capture_duration_ms(step_s: float, lead_s: float = LEAD_S) -> int:
  """The traced window: the lead twice, three step times and a margin.

  Args:
    step_s: the expected step time (e.g. the median of the timed steps).
    lead_s: the wait between the capture request and the step.
  """
  return int(round(1000 * (2 * lead_s + 3 * max(step_s, 0.0) + _MARGIN_S)))


def service_addr(addresses: Sequence[str]) -> str:
  """`client.trace`'s service_addr: "grpc://h1:p1,grpc://h2:p2"."""
  return ",".join("grpc://" + a.replace("grpc://", "") for a in addresses)


def _runs(logdir: str) -> Set[str]:
  return set(glob.glob(os.path.join(logdir, "plugins", "profile", "*")))


def _xplanes(run_dirs) -> Dict[str, int]:
  """{xplane file name: size} in the given run directories."""
  out = {}
  for run in run_dirs:
    for f in glob.glob(os.path.join(run, "*.xplane.pb")):
      out[os.path.basename(f)] = os.path.getsize(f)
  return out


def write_task_names(run_dirs, addresses: Sequence[str],
                     job: str = "worker") -> None:
  """Writes TASKS_FILE in each run directory: address i is task i of `job`
  (xplane files are named "<host>_<port>")."""
  names = {a.replace("grpc://", "").replace(":", "_"):
           f"/job:{job}/replica:0/task:{i}" for i, a in enumerate(addresses)}
  for run in run_dirs:
    atomic_write(os.path.join(run, TASKS_FILE),
                 json.dumps({"format": TASKS_FORMAT, "tasks": names},
                            indent=1))


def _options():
  """Host tracer level 2: TF's expensive ops, by name (level 1, what the
  workers use without options, keeps them without their names). Cheap
  kernels (Const, Identity, NoOp, Reshape) are traced only at level 3;
  the step stats beside the profile have every op."""
  import tensorflow as tf
  return tf.profiler.experimental.ProfilerOptions(
      host_tracer_level=2, python_tracer_level=0, device_tracer_level=1)


def _trace_in_thread(addresses: Sequence[str], logdir: str,
                     duration_ms: int, box: Dict[str, str]) -> threading.Thread:
  def capture():
    import tensorflow as tf
    try:
      tf.profiler.experimental.client.trace(
          service_addr(addresses), logdir, duration_ms,
          num_tracing_attempts=1, options=_options())
    except Exception as e:  # pylint: disable=broad-except  (C++ status errors)
      box["error"] = f"{type(e).__name__}: {str(e).strip()[:300]}"

  thread = threading.Thread(target=capture, daemon=True,
                            name="tfplace-profile-capture")
  thread.start()
  return thread


def capture_remote(run_step: Callable[[], None], addresses: Sequence[str],
                   logdir: str, step_s: float, time_left_s: float,
                   lead_s: float = LEAD_S) -> Optional[str]:
  """Runs `run_step()` once while the profiler servers trace it.

  Args:
    run_step: runs one step (its errors propagate).
    addresses: "host:port" of each worker's profiler server.
    logdir: the profile log directory (the measurement's trace_dir).
    step_s: expected step time, to size the traced window.
    time_left_s: seconds left before the measurement's deadline.
    lead_s: wait between the capture request and the step.

  Returns:
    None if every worker wrote a non-empty xplane file, else why not.
  """
  if not addresses:
    return "no profiler servers to capture from"
  duration_ms = capture_duration_ms(step_s, lead_s)
  if duration_ms / 1000 + lead_s > time_left_s:
    return (f"not enough time left ({time_left_s:.1f} s) for a "
            f"{duration_ms} ms profile capture")
  os.makedirs(logdir, exist_ok=True)
  before = _runs(logdir)
  box: Dict[str, str] = {}
  started = time.monotonic()
  thread = _trace_in_thread(addresses, logdir, duration_ms, box)
  time.sleep(lead_s)
  run_step()
  wait_s = duration_ms / 1000 + GRACE_S - (time.monotonic() - started)
  thread.join(max(0.1, min(wait_s, time_left_s - lead_s)))
  if thread.is_alive():
    return (f"the profile capture from {list(addresses)} did not return "
            f"within {duration_ms / 1000 + GRACE_S:.1f} s")
  runs = _runs(logdir) - before
  files = _xplanes(runs)
  got = sum(1 for size in files.values() if size > 0)
  if got:
    write_task_names(runs, addresses)
  if "error" in box and not got:
    return f"the profile capture from {list(addresses)} failed: {box['error']}"
  if got < len(addresses):
    detail = f"; {box['error']}" if "error" in box else ""
    return (f"{got} of {len(addresses)} profiler servers {list(addresses)} "
            f"wrote a trace ({sorted(files)}){detail}")
  logging.info("profile of %d worker(s) captured: %s", got, sorted(files))
  return None
