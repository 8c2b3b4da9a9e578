"""Atomic file output: a file is either fully written or left untouched."""

import os
import tempfile
from typing import Union


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
