"""The devices of an in-process session: logical CPUs and this machine's GPUs.

In process (no server target) a placement may name
`/job:localhost/replica:0/task:0/device:CPU:i` (the session is given as many
logical CPUs as the highest index needs; they share the machine's cores)
and `.../device:GPU:i` for each GPU TensorFlow sees here
(`tf.config.list_physical_devices("GPU")`). Anything else (another job or
task, another device type, a GPU this machine lacks) is refused before a
session opens, with the devices that would work.
"""

from typing import Iterable

from tfplace.errors import MeasureError


def cpu_bytes_held() -> int:
  """Bytes this process's CPU allocator holds now: its own tensors (a
  loaded Keras model's weights, eager values). The logical CPUs of an
  in-process session allocate from the same allocator. 0 where it keeps no
  statistics (TF's default CPU allocator), and on a machine with GPUs:
  reading it starts TF's eager runtime, which would create the GPUs'
  allocators with its options rather than the session's (memory growth)."""
  import tensorflow as tf
  if visible_gpus():
    return 0
  try:
    return int(tf.config.experimental.get_memory_info("CPU:0")["current"])
  except (ValueError, tf.errors.OpError):
    return 0


def visible_gpus() -> int:
  """GPUs TensorFlow can use in this process."""
  import tensorflow as tf
  return len(tf.config.list_physical_devices("GPU"))


def local_cpus_for(device_names: Iterable[str]) -> int:
  """The logical CPUs an in-process session needs for `device_names` (at
  least one; it sees every GPU of this machine).

  Raises:
    MeasureError: a name is not an in-process CPU or GPU, or names a GPU
      that this machine does not have.
  """
  import tensorflow as tf
  cpus, gpus = 1, 0
  for name in set(device_names):
    spec = tf.DeviceSpec.from_string(name)
    if spec.job not in (None, "localhost") or spec.task not in (None, 0):
      raise MeasureError(
          f"device {name} is not a local device; pass --target or "
          "--local_workers to measure on a server cluster")
    kind = (spec.device_type or "").upper()
    index = spec.device_index or 0
    if kind == "CPU":
      cpus = max(cpus, index + 1)
    elif kind == "GPU":
      gpus = max(gpus, index + 1)
    else:
      raise MeasureError(f"device {name}: only CPU and GPU devices can be "
                         "measured in process")
  if gpus:
    have = visible_gpus()
    if gpus > have:
      raise MeasureError(
          f"GPU:{gpus - 1} is named but TensorFlow sees {have} GPU(s) on "
          "this machine"
          + ("" if have else " (a CPU-only TensorFlow, no CUDA driver, or "
             "CUDA_VISIBLE_DEVICES empty?)")
          + "; place on the cluster `local` to use the devices it has")
  return cpus
