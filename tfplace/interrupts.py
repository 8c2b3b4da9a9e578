"""Ctrl-C that always ends a run cleanly, even when TensorFlow swallows it.

`install()` (done by the `tfplace` command and the scripts) makes SIGINT set
a flag before raising `KeyboardInterrupt` as usual. TensorFlow's C++ code can
eat the exception (a Session.run in flight), but not the flag: every output
goes through `tfplace.io_utils.atomic_write`, which refuses to write once the
flag is set, so an interrupted run never half-writes or overwrites a file,
and the command exits with status 130 when it returns. A search that stops
on Ctrl-C and saves its best-so-far result does so inside `writes_allowed()`.
Where TensorFlow's C++ code swallows the exception it can still print its
traceback (`PyErr_Print`, through `sys.excepthook`; seen once in CI, a
Ctrl-C inside `nest.flatten` while `tfplace import` built a model): once
the flag is set, the hooks `install()` puts in front of Python's drop a
KeyboardInterrupt's traceback, as the one-line "interrupted" says it all.
"""

import contextlib
import os
import signal
import sys
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
    if not getattr(sys.excepthook, "drops_interrupts", False):
      sys.excepthook = _dropping_interrupts(sys.excepthook)
    if not getattr(sys.unraisablehook, "drops_interrupts", False):
      sys.unraisablehook = _dropping_unraisable_interrupts(
          sys.unraisablehook)


def _dropping_interrupts(hook):
  """`sys.excepthook` that prints nothing for a KeyboardInterrupt once
  the flag is set, and calls `hook` for everything else."""
  def excepthook(kind, value, traceback):
    if interrupted() and issubclass(kind, KeyboardInterrupt):
      return
    hook(kind, value, traceback)
  excepthook.drops_interrupts = True
  return excepthook


def _dropping_unraisable_interrupts(hook):
  """`sys.unraisablehook`, the same for exceptions Python cannot raise
  (in a `__del__` or a callback)."""
  def unraisablehook(unraisable):
    if interrupted() and isinstance(unraisable.exc_value, KeyboardInterrupt):
      return
    hook(unraisable)
  unraisablehook.drops_interrupts = True
  return unraisablehook


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
