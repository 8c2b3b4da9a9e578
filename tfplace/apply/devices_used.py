"""The devices TF ran eager functions' ops on, and how they match a placement.

`record_devices()` turns on TF's function graph collection
(`tf.summary.trace_on(graph=True)`) around the first call of a function and
reads back what `tf.summary.trace_export` writes: the RunMetadata of every
function instantiated meanwhile, whose partition graphs hold each node with
the device TF's placer assigned (after colocation, soft placement and
inlining). A function is instantiated once, at its first call, so call it
for the first time inside the block.

    with tfplace.apply.record_devices() as used:
      placed(x, y)
    match = used.compare(placement, prefix=placed.report.call_prefix)
    print(match.fraction, match.mismatches[:5])
"""

import collections
import contextlib
import dataclasses
import os
import shutil
import tempfile
from typing import Dict, Iterator, List, Tuple

from tfplace.device_names import canonical_device
from tfplace.errors import ClusterError, MeasureError
from tfplace.placement import Placement


@dataclasses.dataclass(frozen=True)
class DeviceMatch:
  """How the devices TF used agree with a placement.

  Attributes:
    compared: placement ops that TF ran (found in the partition graphs).
    matched: those that ran on the placement's device.
    mismatches: (op, placement device, device used) of the others.
    not_run: placement ops not found (import-only ops, ops TF optimized
      away or renamed).
  """
  compared: int
  matched: int
  mismatches: Tuple[Tuple[str, str, str], ...]
  not_run: int

  @property
  def fraction(self) -> float:
    return self.matched / max(1, self.compared)


@dataclasses.dataclass
class DevicesUsed:
  """Node name -> device of each function graph instantiated while recording.

  Attributes:
    functions: one {node name: full device} per instantiated function.
  """
  functions: List[Dict[str, str]] = dataclasses.field(default_factory=list)

  def devices_by_op(self, prefix: str = "") -> Dict[str, str]:
    """Op name -> device for the function holding most "prefix/" nodes, the
    prefix stripped (TF's runtime names inlined ops "<call op>/<op>")."""
    if not self.functions:
      return {}
    head = prefix + "/" if prefix else ""
    best = max(self.functions,
               key=lambda f: sum(1 for n in f if n.startswith(head)))
    return {n[len(head):]: d for n, d in best.items() if n.startswith(head)}

  def compare(self, placement: Placement, prefix: str = "") -> DeviceMatch:
    """Compares the placement with the devices used (see `DeviceMatch`)."""
    used = self.devices_by_op(prefix)
    mismatches, matched, not_run = [], 0, 0
    for name, device in placement.devices.items():
      if name not in used:
        not_run += 1
      elif used[name] == device:
        matched += 1
      else:
        mismatches.append((name, device, used[name]))
    return DeviceMatch(compared=matched + len(mismatches), matched=matched,
                       mismatches=tuple(mismatches), not_run=not_run)


@contextlib.contextmanager
def record_devices() -> Iterator[DevicesUsed]:
  """Records the devices of the functions first called inside the block."""
  import tensorflow as tf
  used = DevicesUsed()
  log_dir = tempfile.mkdtemp(prefix="tfplace_devices_")
  try:
    writer = tf.summary.create_file_writer(log_dir)
    tf.summary.trace_on(graph=True, profiler=False)
    try:
      yield used
    finally:
      with writer.as_default():
        tf.summary.trace_export("tfplace_devices", step=0)
      writer.close()
    used.functions.extend(_read_functions(log_dir))
  finally:
    shutil.rmtree(log_dir, ignore_errors=True)


def _read_functions(log_dir: str) -> List[Dict[str, str]]:
  """The partition graphs' node devices from the event files in log_dir."""
  import tensorflow as tf
  out = []
  for name in sorted(os.listdir(log_dir)):
    for record in tf.data.TFRecordDataset(os.path.join(log_dir, name)):
      event = tf.compat.v1.Event.FromString(record.numpy())
      for value in event.summary.value:
        out.extend(_function_devices(_run_metadata(value)))
  if not out:
    raise MeasureError("no function was instantiated while recording "
                       "devices; call the step for the first time inside "
                       "record_devices()")
  return out


def _run_metadata(value):
  import tensorflow as tf
  data = tf.make_ndarray(value.tensor).reshape(-1)
  return tf.compat.v1.RunMetadata.FromString(data[0] if len(data) else b"")


def _function_devices(run_metadata) -> List[Dict[str, str]]:
  out = []
  for function in run_metadata.function_graphs:
    devices: Dict[str, str] = {}
    for graph in function.partition_graphs:
      for node in graph.node:
        try:
          devices[node.name] = canonical_device(node.device)
        except ClusterError:
          continue
    out.append(devices)
  return out


def device_counts(devices_by_op: Dict[str, str]) -> Dict[str, int]:
  """Ops per device."""
  return dict(collections.Counter(devices_by_op.values()))
