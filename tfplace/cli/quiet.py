"""Quiet runs: TensorFlow's C++ start-up lines kept off the terminal.

TensorFlow 2.21 prints, before its own log level applies, lines such as

    WARNING: All log messages before absl::InitializeLog() is called ...
    I0000 00:00:1795443880.904543   25831 port.cc:153] oneDNN custom ...
    E0000 00:00:1795443890.625949   25831 cuda_platform.cc:52] failed call
        to cuInit: ... (on a machine without a GPU driver)

`TF_CPP_MIN_LOG_LEVEL` does not reach them. `filtered_stderr` passes the
process's stderr (file descriptor 2, so C++ output too) through a thread that
drops exactly these pre-initialization lines: the banner, INFO and WARNING
lines stamped "0000 00:00" (before logging was set up), and the cuInit
failure only after TensorFlow said it found no CUDA driver (so a real GPU
error still shows), and the profiler client's "Starting to trace for N ms.
Remaining attempt(s): K" before each remote capture (a measurement's
progress bar says the same), and the three-line notice the `gym` package
prints when tf-agents imports it ("Gym has been unmaintained since 2022 ...
contact the authors of your software": tfplace uses no gym environment).
Everything else passes unchanged;
`--verbosity 0` (or `-v 0`, or higher) turns the filter off.
"""

import contextlib
import os
import re
import sys
import threading

_PRE_INIT = re.compile(r"^[IW]0000 00:00:")
_BANNER = "WARNING: All log messages before absl::InitializeLog() is called"
_NO_DRIVER = "Could not find cuda drivers on your machine"
_PROFILER_START = re.compile(r"^Starting to trace for \d+ ms\. Remaining "
                             r"attempt\(s\): \d+$")
_GYM_NOTICE = ("Gym has been unmaintained since 2022 and does not support "
               "NumPy 2.0",
               "Please upgrade to Gymnasium, the maintained drop-in "
               "replacement of Gym, or contact the authors of your software",
               "See the migration guide at https://gymnasium.farama.org/")
_CUINIT = re.compile(r"^E0000 00:00:\S+\s+\d+ cuda_\w+\.cc:\d+\] failed call "
                     r"to cuInit")


class _LineFilter:
  """Decides, line by line, what reaches the real stderr."""

  def __init__(self):
    self.no_driver = False

  def keep(self, line: str) -> bool:
    if _NO_DRIVER in line:
      self.no_driver = True
    if (line.startswith(_BANNER) or _PRE_INIT.match(line)
        or _PROFILER_START.match(line.rstrip("\n"))
        or line.startswith(_GYM_NOTICE)):
      return False
    return not (self.no_driver and _CUINIT.match(line))


@contextlib.contextmanager
def filtered_stderr(enabled: bool = True):
  """Drops TensorFlow's pre-initialization noise from fd 2 while active."""
  if not enabled:
    yield
    return
  sys.stderr.flush()
  real = os.dup(2)
  read_end, write_end = os.pipe()
  os.dup2(write_end, 2)
  os.close(write_end)
  thread = threading.Thread(target=_pump, args=(read_end, real),
                            name="tfplace-stderr", daemon=True)
  thread.start()
  try:
    yield
  finally:
    sys.stderr.flush()
    os.dup2(real, 2)  # Closes the pipe's last write end: the pump sees EOF.
    thread.join(timeout=5)
    os.close(real)


def _pump(read_end: int, real: int) -> None:
  line_filter = _LineFilter()
  with os.fdopen(read_end, "rb") as pipe:
    for raw in pipe:
      if line_filter.keep(raw.decode("utf-8", "replace")):
        os.write(real, raw)
