"""TensorFlow device strings: parse partial forms, give the full form and type.

Both clusters (`tfplace.cost.cluster`) and placements (`tfplace.placement`)
name devices by full TF device strings
('/job:localhost/replica:0/task:0/device:GPU:0').
"""

import functools
import re

from tfplace.errors import ClusterError

_DEVICE_RE = re.compile(
    r"^/job:[\w.-]+/replica:\d+/task:\d+/device:([A-Za-z_]+):(\d+)$")


@functools.lru_cache(maxsize=4096)
def canonical_device(name: str) -> str:
  """Returns the full TF device string for `name`, or raises ClusterError.

  Accepts partial forms ("/device:GPU:0", "/gpu:0", "/job:worker/task:1/cpu:0")
  and fills job=localhost, replica=0, task=0.
  """
  import tensorflow as tf  # Lazy: only device-string parsing needs TF here.
  if not isinstance(name, str) or not name.startswith("/"):
    raise ClusterError(f"malformed device string {name!r}: expected e.g. "
                       "'/job:localhost/replica:0/task:0/device:CPU:0'")
  try:
    spec = tf.DeviceSpec.from_string(name)
  except (ValueError, TypeError) as e:
    raise ClusterError(f"malformed device string {name!r}: {e}") from None
  if not spec.device_type or spec.device_index is None:
    raise ClusterError(f"device string {name!r} names no device type and "
                       "index (e.g. '/device:GPU:0')")
  spec = spec.replace(job=spec.job or "localhost", replica=spec.replica or 0,
                      task=spec.task or 0, device_type=spec.device_type.upper())
  full = spec.to_string()
  if not _DEVICE_RE.match(full):
    raise ClusterError(f"malformed device string {name!r}")
  return full


def device_type_of(name: str) -> str:
  """"CPU" for '/job:x/replica:0/task:0/device:CPU:0'."""
  m = _DEVICE_RE.match(name)
  if not m:
    raise ClusterError(f"not a full device string: {name!r}")
  return m.group(1).upper()
