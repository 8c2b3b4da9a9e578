"""Atomic file output: a file is either fully written or left untouched."""

import json
import math
import os
import tempfile
from typing import Optional, Type, Union


def atomic_write(path: str, data: Union[bytes, str]) -> None:
  """Writes `data` to `path` through a temporary file and a rename.

  A crash or an exception part way leaves any existing `path` as it was.

  Args:
    path: destination file.
    data: bytes, or text (written as UTF-8).
  """
  path = os.path.abspath(path)
  directory = os.path.dirname(path)
  os.makedirs(directory, exist_ok=True)
  if isinstance(data, str):
    data = data.encode("utf-8")
  fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".part")
  try:
    with os.fdopen(fd, "wb") as f:
      f.write(data)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the usual mode.
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
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
