"""One TensorFlow server process of a local (or multi-host) cluster.

Run as `python -m tfplace.measurement.worker_main --task I --spec JSON
[--job worker] [--cores 0,1] [--profiler_port P] [--ready_file PATH]
[--parent_pid PID]`. The
process pins itself to the given CPU cores (`os.sched_setaffinity`), sizes
TensorFlow's intra- and inter-op thread pools to that many cores, starts a TF
profiler server on port P (`tf.profiler.experimental.server.start`; skipped
with a warning if P cannot be bound, which never stops the worker), starts a
`tf.distribute.Server` for task I of the cluster spec, optionally writes
`ready_file` once the server is up, and serves until killed (or, with
`--parent_pid`, until that process is gone: a client killed before it could
stop its workers leaves none behind). A client captures
this worker's op timeline with `tf.profiler.experimental.client.trace(
"grpc://host:P", logdir, duration_ms)`.

This is a process entry point, so it reads its own command line (argparse, not
absl flags: it must not see the flags of whoever spawned it).
"""

import argparse
import errno
import json
import os
import socket
import sys
import threading
import time
from typing import List, Optional


def _parse(argv: Optional[List[str]]) -> argparse.Namespace:
  parser = argparse.ArgumentParser(prog="tfplace.measurement.worker_main")
  parser.add_argument("--task", type=int, required=True)
  parser.add_argument("--spec", required=True,
                      help='cluster spec JSON, e.g. {"worker": ["127.0.0.1:2222"]}')
  parser.add_argument("--job", default="worker")
  parser.add_argument("--cores", default="",
                      help="comma separated CPU ids to pin to (empty: all)")
  parser.add_argument("--profiler_port", type=int, default=0,
                      help="port of a TF profiler server (0: none)")
  parser.add_argument("--ready_file", default="")
  parser.add_argument("--parent_pid", type=int, default=0,
                      help="exit once this process (the one that started "
                      "this worker) is gone (0: serve until killed)")
  return parser.parse_args(argv)


def _exit_with_parent(pid: int, poll_s: float = 1.0) -> None:
  """Ends this process once its parent `pid` is gone (it is then no longer
  our parent: a killed client's workers are handed to init), checked every
  `poll_s` seconds in a daemon thread. `pid` <= 0: never."""
  if pid <= 0:
    return

  def watch():
    while os.getppid() == pid:
      time.sleep(poll_s)
    sys.stderr.write(f"tfplace worker: process {pid}, which started this "
                     "worker, is gone; exiting\n")
    sys.stderr.flush()
    os._exit(0)  # pylint: disable=protected-access  (no TF teardown)

  threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def _pin(cores: str) -> int:
  """Pins this process to `cores`; returns the number of cores it may use."""
  if cores:
    ids = {int(c) for c in cores.split(",") if c.strip()}
    if hasattr(os, "sched_setaffinity"):
      os.sched_setaffinity(0, ids)
    return len(ids)
  if hasattr(os, "sched_getaffinity"):
    return len(os.sched_getaffinity(0))
  return os.cpu_count() or 1


def _can_bind(port: int) -> bool:
  """True if `port` is free on every interface (the profiler binds [::])."""
  for family, host in ((socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")):
    try:
      with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, port))
      return True
    except OSError as e:
      if family == socket.AF_INET6 and e.errno == errno.EAFNOSUPPORT:
        continue  # no IPv6 here: try IPv4
      return False
  return False


def _start_profiler(port: int) -> int:
  """Starts a TF profiler server on `port`; returns the port, or 0 if none.

  TensorFlow only logs a failure to bind, so the port is checked first; any
  failure is a warning on stderr, never an exit.
  """
  if port <= 0:
    return 0
  if not _can_bind(port):
    sys.stderr.write(f"WARNING: profiler port {port} cannot be bound; this "
                     "worker runs without a profiler server\n")
    return 0
  import tensorflow as tf
  try:
    tf.profiler.experimental.server.start(port)
  except Exception as e:  # pylint: disable=broad-except  (never fatal)
    sys.stderr.write(f"WARNING: profiler server not started: {e}\n")
    return 0
  return port


def main(argv: Optional[List[str]] = None) -> None:
  """Starts the server and blocks."""
  args = _parse(argv)
  _exit_with_parent(args.parent_pid)
  num_cores = _pin(args.cores)
  import tfplace  # noqa: F401  (environment before TensorFlow)
  import tensorflow as tf
  spec = json.loads(args.spec)
  profiler_port = _start_profiler(args.profiler_port)
  config = tf.compat.v1.ConfigProto(
      intra_op_parallelism_threads=num_cores,
      inter_op_parallelism_threads=num_cores,
      allow_soft_placement=False)
  config.graph_options.rewrite_options.disable_meta_optimizer = True
  # A GPU this worker is given (CUDA_VISIBLE_DEVICES) takes memory as the
  # steps need it, not nearly all of it at start.
  config.gpu_options.allow_growth = True
  server = tf.distribute.Server(
      tf.train.ClusterSpec(spec), job_name=args.job, task_index=args.task,
      config=config, start=True)
  if args.ready_file:
    from tfplace.io_utils import atomic_write
    atomic_write(args.ready_file, json.dumps(
        {"pid": os.getpid(), "target": server.target, "cores": num_cores,
         "profiler_port": profiler_port or None}))
  sys.stdout.write(f"tfplace worker {args.job}:{args.task} serving at "
                   f"{server.target} on {num_cores} core(s), profiler port "
                   f"{profiler_port or 'none'}\n")
  sys.stdout.flush()
  server.join()


if __name__ == "__main__":
  main()
