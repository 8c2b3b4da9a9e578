"""Which TF task each server of a cluster spec really is.

A cluster spec (`{"worker": ["host:port", ...]}`) lists each task's address
in task order. The servers were started with a spec of their own, and TF
names devices by the servers' spec: a client spec in another order (or
naming another cluster's servers) still runs, but tfplace then names each
server's profile, liveness and benchmark by the wrong task (a swapped
spec wrote task 1's profile as task 0's).

A server knows its own task: a graph run with it as the master places an
op that names no device on the master's own task, and the step's trace
names that device. `Session.list_devices` on it lists the devices of every
task of its cluster. One run of one op per address (~20 ms on loopback)
tells both.
"""

import re
from typing import Optional, Sequence, Set, Tuple

from tfplace.errors import MeasureError

_TASK = re.compile(r"^/job:([^/]+)/replica:\d+/task:(\d+)(/|$)")


def served_task(address: str, timeout_s: float = 10.0
                ) -> Tuple[Optional[Tuple[str, int]], Set[Tuple[str, int]]]:
  """(the server's own (job, task) or None, every (job, task) it lists).

  Args:
    address: "host:port" of a running TF server.
    timeout_s: deadline of each call.

  Raises:
    MeasureError: the server does not answer the run.
  """
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from tfplace.measurement.session import first_line, session_config  # pylint: disable=import-outside-toplevel
  graph = tf.Graph()
  with graph.as_default():
    fed = tf.compat.v1.placeholder(tf.float32, [], name="probe_in")
    out = tf.add(fed, 1.0, name="probe")  # No device: the master's own.
  metadata = tf.compat.v1.RunMetadata()
  options = tf.compat.v1.RunOptions(
      trace_level=tf.compat.v1.RunOptions.FULL_TRACE,
      timeout_in_ms=int(timeout_s * 1000))
  config = session_config(remote=True, timeout_s=timeout_s)
  try:
    with tf.compat.v1.Session("grpc://" + address, graph=graph,
                              config=config) as sess:
      listed = {_task_of(d.name) for d in sess.list_devices()}
      sess.run(out, {fed: 0.0}, options=options, run_metadata=metadata)
  except tf.errors.OpError as e:
    raise MeasureError(f"cannot ask TF server {address} which task it is: "
                       f"{first_line(e)}") from None
  ran = {_task_of(d.device) for d in metadata.step_stats.dev_stats} - {None}
  return (next(iter(ran)) if len(ran) == 1 else None), listed - {None}


def _task_of(device: str) -> Optional[Tuple[str, int]]:
  m = _TASK.match(device)
  return (m.group(1), int(m.group(2))) if m else None


# The list `check_served_tasks` checks unless told another.
SPEC = "the cluster spec"


def check_served_tasks(addresses: Sequence[str], job: str = "worker",
                       timeout_s: float = 10.0, source: str = SPEC) -> None:
  """Raises unless the server at `addresses[i]` is `job` task i, and the
  servers' cluster has as many `job` tasks as `addresses`; `source` names
  the list in the error ("the cluster spec", "MeasureConfig.workers").

  Raises:
    MeasureError: naming the first address that serves another task (and
      the task it serves), or the number of tasks; or a server that does
      not answer.
  """
  for i, address in enumerate(addresses):
    own, listed = served_task(address.replace("grpc://", ""), timeout_s)
    wrong = task_mismatch(address, i, len(addresses), own, listed, job,
                          source)
    if wrong:
      raise MeasureError(wrong)


def task_mismatch(address: str, task: int, num_tasks: int,
                  own: Optional[Tuple[str, int]],
                  listed: Set[Tuple[str, int]],
                  job: str = "worker", source: str = SPEC
                  ) -> Optional[str]:
  """Why the server at `address`, listed as `job` task `task` of `source`'s
  `num_tasks` addresses, is not that task (its `served_task` answer: `own`,
  `listed`), or None if it is."""
  remedy = ("give the spec the servers were started with" if source == SPEC
            else "list the servers' addresses in their own spec's order")
  if own is not None and own != (job, task):
    return (f"{source} lists {address} as /job:{job}/task:{task}, but the "
            f"server there is /job:{own[0]}/task:{own[1]} of its own "
            f"cluster; {remedy} (each task's address, in task order)")
  tasks = sum(j == job for j, _ in listed)
  if tasks != num_tasks:
    return (f"{source} lists {num_tasks} /job:{job} task(s), but the "
            f"server at {address} is in a cluster of {tasks}; {remedy}")
  return None
