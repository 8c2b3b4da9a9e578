"""Atomic file output: a file is either fully written or left untouched."""

import json
import math
import os
import tempfile
from typing import Optional, Sequence, Type, Union

from tfplace import interrupts
from tfplace.errors import Interrupted, OutputError


def atomic_write(path: str, data: Union[bytes, str]) -> None:
  """Writes `data` to `path` through a temporary file and a rename.

  A crash or an exception part way leaves any existing `path` as it was;
  after Ctrl-C (`tfplace.interrupts`) nothing is written.

  Args:
    path: destination file.
    data: bytes, or text (written as UTF-8).
  """
  if interrupts.writes_blocked():
    raise Interrupted(f"interrupted: {path} was not written")
  path = os.path.abspath(path)
  directory = os.path.dirname(path)
  if isinstance(data, str):
    data = data.encode("utf-8")
  if os.path.isdir(path):
    raise OutputError(f"cannot write {path}: it is a directory")
  try:
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".part")
  except OSError as e:
    raise OutputError(f"cannot write {path}: {e.strerror or e}") from None
  try:
    with os.fdopen(fd, "wb") as f:
      f.write(data)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the usual mode.
    os.replace(tmp, path)
  except BaseException as e:
    if os.path.exists(tmp):
      os.remove(tmp)
    if isinstance(e, OSError):
      raise OutputError(f"cannot write {path}: {e.strerror or e}") from None
    raise


def read_json(path: str, what: str, error: Type[Exception]):
  """Parses the JSON file at `path`, raising `error` with a clear message.

  Args:
    path: the file.
    what: what the file should be, for messages (e.g. "placement").
    error: the exception class to raise (a TfplaceError subclass).
  """
  try:
    with open(path) as f:
      return json.load(f)
  except FileNotFoundError:
    raise error(f"no such {what} file: {path}") from None
  except IsADirectoryError:
    raise error(f"{path} is a directory, not a {what} file") from None
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    raise error(f"{path} is not valid JSON: {e}") from None


def json_number(value: float) -> Optional[float]:
  """`value`, or None when it is inf or nan (JSON has neither)."""
  return value if math.isfinite(value) else None


def check_out_path(path: Optional[str], flag: str = "--out",
                   inputs: Sequence[Optional[str]] = ()) -> None:
  """Raises OutputError unless `path` can be written (checked up front,
  before long work, so a bad path never costs a run) without replacing one
  of the files the command reads (`inputs`; None and non-files skipped).

  Missing folders are fine: `atomic_write` makes them when the file is
  written, if the nearest existing folder above is writable; nothing is
  made here, so a run that fails leaves no empty folders behind.
  """
  if not path:
    raise OutputError(f"{flag} is required")
  for source in inputs:
    if (source and os.path.isfile(source) and os.path.exists(path)
        and os.path.samefile(path, source)):
      raise OutputError(f"{flag} {path} is also an input of this command "
                        f"({source}): write to another file, or the input "
                        "would be lost")
  if os.path.isdir(path):
    raise OutputError(f"{flag} {path} is a directory")
  _check_can_make(path, flag)
  if os.path.exists(path) and not os.access(path, os.W_OK):
    raise OutputError(f"{flag} {path} exists and is not writable")


def _check_can_make(path: str, flag: str) -> None:
  """Raises OutputError unless the nearest existing folder above `path` is
  a writable folder (missing folders between are made when written)."""
  existing = os.path.dirname(os.path.abspath(path))
  while not os.path.exists(existing):
    existing = os.path.dirname(existing)
  if not os.path.isdir(existing):
    raise OutputError(f"{flag} {path}: {existing} is a file, not a "
                      f"directory; give {flag} a path inside a directory")
  if not os.access(existing, os.W_OK | os.X_OK):
    raise OutputError(f"{flag} {path}: directory {existing} is not writable")


def check_out_dir(path: str, flag: str) -> None:
  """Raises OutputError unless `path` can be made a folder of new output
  (checked up front, like `check_out_path`): a file, or a folder that
  already holds something (a new trace would be mixed with, or written
  over, what is there), is refused."""
  if os.path.isfile(path):
    raise OutputError(f"{flag} {path} is a file; give a folder")
  if os.path.isdir(path):
    if os.listdir(path):
      raise OutputError(f"{flag} {path} is not empty; give a new or empty "
                        "folder (what it holds would be mixed with the new "
                        "output, or written over)")
    if not os.access(path, os.W_OK | os.X_OK):
      raise OutputError(f"{flag} {path} is not writable")
    return
  _check_can_make(path, flag)
