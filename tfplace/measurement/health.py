"""Are the workers of a TF server cluster alive? Checked while steps run.

A worker killed during a measurement does not make `Session.run` fail
promptly: TF's gRPC client retries an unavailable master until the run's
deadline, and a master whose other worker died waits for it the same way
(then `Session.close()` waits once more). So `measure` does not rely on TF
to notice: a `HealthMonitor` thread checks every worker every
`MeasureConfig.health_interval_s` (a TCP connect to its server port, and for
the processes of a `LocalCluster` in this process, whether they exited) and
the measurement ends as soon as one is found dead, naming it.

A worker that is alive but hung (stopped, deadlocked) still accepts
connections; the per-run deadline (`MeasureConfig.step_timeout_s`) ends that
case.
"""

import dataclasses
import socket
import threading
from typing import List, Optional, Sequence

from absl import logging


@dataclasses.dataclass(frozen=True)
class DeadTask:
  """A worker found dead.

  Attributes:
    task: its task index in the "worker" job.
    address: its "host:port".
    why: what the check saw (e.g. "process exited with status -9",
      "connection refused").
  """
  task: int
  address: str
  why: str

  def __str__(self) -> str:
    return f"worker task {self.task} ({self.address}): {self.why}"


def _connect_error(address: str, timeout_s: float) -> Optional[str]:
  """None if `address` accepts a TCP connection, else why not."""
  host, _, port = address.replace("grpc://", "").rpartition(":")
  try:
    socket.create_connection((host, int(port)), timeout=timeout_s).close()
    return None
  except socket.timeout:
    return f"no answer within {timeout_s:.1f} s"
  except (OSError, ValueError) as e:
    return getattr(e, "strerror", None) or str(e) or type(e).__name__


def dead_tasks(addresses: Sequence[str], processes: Sequence = (),
               timeout_s: float = 1.0) -> List[DeadTask]:
  """The workers that are not alive.

  Args:
    addresses: "host:port" of each worker, task order.
    processes: optionally, the `subprocess.Popen` of each worker (a
      `LocalCluster`'s): an exited process is dead whatever its port says.
    timeout_s: how long a TCP connect may take.
  """
  out = []
  for task, address in enumerate(addresses):
    proc = processes[task] if task < len(processes) else None
    if proc is not None and proc.poll() is not None:
      out.append(DeadTask(task, address, f"its process {proc.pid} exited "
                          f"with status {proc.returncode}"))
      continue
    why = _connect_error(address, timeout_s)
    if why:
      out.append(DeadTask(task, address, f"its server does not answer "
                          f"({why})"))
  return out


class HealthMonitor:
  """Checks the workers every `interval_s` in a daemon thread.

  `dead` holds the first finding (empty while all are alive); `died` is
  set at the same time, so a waiting thread wakes up at once.
  """

  def __init__(self, addresses: Sequence[str], processes: Sequence = (),
               interval_s: float = 0.5,
               died: Optional[threading.Event] = None):
    """Describes the checks; `start()` (or `with`) begins them.

    Args:
      addresses: "host:port" of each worker, task order.
      processes: optionally the worker processes (`subprocess.Popen`).
      interval_s: seconds between two checks.
      died: an event to set when a worker is found dead (default: a new
        one); pass one that another thread also sets to wait for both.
    """
    self.addresses = list(addresses)
    self.processes = list(processes)
    self.interval_s = interval_s
    self.dead: List[DeadTask] = []
    self.died = died or threading.Event()
    self._stop = threading.Event()
    self._thread: Optional[threading.Thread] = None

  def check_now(self) -> List[DeadTask]:
    """Checks once, records and returns what is dead."""
    found = dead_tasks(self.addresses, self.processes,
                       timeout_s=max(0.2, min(2.0, self.interval_s * 2)))
    if found and not self.dead:
      self.dead = found
      self.died.set()
      logging.warning("dead worker(s): %s", "; ".join(map(str, found)))
    return found

  def start(self) -> "HealthMonitor":
    if self._thread is None and self.addresses:
      self._thread = threading.Thread(target=self._loop, daemon=True,
                                      name="tfplace-health")
      self._thread.start()
    return self

  def _loop(self) -> None:
    while not self._stop.wait(self.interval_s):
      if self.check_now():
        return

  def stop(self) -> None:
    self._stop.set()

  def __enter__(self) -> "HealthMonitor":
    return self.start()

  def __exit__(self, *exc) -> None:
    self.stop()
