"""Ctrl-C that always ends a run cleanly, even when TensorFlow swallows it.

`install()` (done by the `tfplace` command and the scripts) makes SIGINT set
a flag before raising `KeyboardInterrupt` as usual. TensorFlow's C++ code can
eat the exception (a Session.run in flight), but not the flag: every output
goes through `tfplace.io_utils.atomic_write`, which refuses to write once the
flag is set, so an interrupted run never half-writes or overwrites a file,
and the command exits with status 130 when it returns. A search that stops
on Ctrl-C and saves its best-so-far result does so inside `writes_allowed()`.
"""

import contextlib
import os
import signal
import threading
from typing import Optional

_interrupted = threading.Event()
_allowed = threading.local()
_program = {"name": None, "running": False}


def _handler(signum, frame):
  del signum, frame
  _interrupted.set()
  if _program["name"] and not _program["running"]:
    # Still importing: nothing has been written, so leave at once and quietly.
    os.write(2, f"{_program['name']}: interrupted\n".encode())
    os._exit(130)  # pylint: disable=protected-access
  raise KeyboardInterrupt


def install(program: Optional[str] = None) -> None:
  """Routes SIGINT through the flag (main thread only; no-op elsewhere).

  Args:
    program: the program's name. Given, a Ctrl-C that comes before
      `started()` (while modules are still being imported) ends the process
      at once with status 130 and one line, instead of a traceback.
  """
  if threading.current_thread() is threading.main_thread():
    _program["name"] = program or _program["name"]
    signal.signal(signal.SIGINT, _handler)


def started() -> None:
  """The program's work begins: from now on Ctrl-C raises KeyboardInterrupt."""
  _program["running"] = True


def interrupted() -> bool:
  """True once Ctrl-C was pressed."""
  return _interrupted.is_set()


def note_interrupt() -> None:
  """Records an interrupt seen some other way (a caught KeyboardInterrupt)."""
  _interrupted.set()


def clear() -> None:
  """Forgets an earlier interrupt (tests, or a caller that recovered)."""
  _interrupted.clear()


def writes_blocked() -> bool:
  """True if outputs must not be written now (interrupted, not allowed)."""
  return interrupted() and not getattr(_allowed, "on", False)


@contextlib.contextmanager
def writes_allowed():
  """Lets this thread write after an interrupt (a best-so-far result)."""
  previous = getattr(_allowed, "on", False)
  _allowed.on = True
  try:
    yield
  finally:
    _allowed.on = previous
