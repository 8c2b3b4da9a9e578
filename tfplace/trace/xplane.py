"""Reading TF profiler `.xplane.pb` files (XSpace protos) into trace events.

An XSpace has one plane per device ("/host:CPU", "/device:GPU:0", ...); each
plane has lines (threads, streams) of timed events whose metadata name a TF
op as "name:Type" (host threads) or carry it in a "tf_op" stat (GPU kernels).
The proto is read directly rather than through TF's trace-viewer converter,
which keeps the op name of only some events.

A profile run of a TF server cluster has one file per worker
(`<host>_<port>.xplane.pb`); `read_xplanes` merges them on the hosts' clocks
(event times are absolute, in ns since the epoch) and, when there are
several, prefixes each device with the file's host: "127.0.0.1_6009/host:CPU".
"""

import os
import re
from typing import Dict, List, Optional, Sequence, Tuple

from tfplace.errors import TraceError
from tfplace.trace.trace import (OP, TRANSFER, Trace, TraceEvent,
                                 is_transfer_op, make_trace)

# "name:Type": node names hold no ":"; a type starts with a letter or "_".
_TF_OP = re.compile(r"^([^:\s][^:]*):([A-Za-z_][\w>]*)$")
# Raw event: (device, name, op type, start ns, duration ps, stats).
_Raw = Tuple[str, str, str, int, int, Dict[str, str]]


def xplane_host(path: str) -> str:
  """The host an `.xplane.pb` file belongs to: its name ("127.0.0.1_6009")."""
  return os.path.basename(path)[:-len(".xplane.pb")]


def _parse_space(path: str):
  import tfplace  # noqa: F401  (env before TF)
  from google.protobuf import message
  from tensorflow.tsl.profiler.protobuf import xplane_pb2
  if os.path.getsize(path) == 0:
    raise TraceError(f"{path}: the file is empty")
  space = xplane_pb2.XSpace()
  try:
    with open(path, "rb") as f:
      space.ParseFromString(f.read())
  except (message.DecodeError, RuntimeError, ValueError) as e:
    raise TraceError(
        f"{path}: not a readable TF profiler xplane ({e})") from None
  return space


def _stats(plane, stats) -> Dict[str, str]:
  """The string-valued stats of an event, by stat name."""
  out = {}
  for s in stats:
    name = plane.stat_metadata[s.metadata_id].name
    kind = s.WhichOneof("value")
    if kind == "str_value":
      out[name] = s.str_value
    elif kind == "ref_value":
      out[name] = plane.stat_metadata[s.ref_value].name
  return out


def _op_of(metadata_name: str,
           stats: Dict[str, str]) -> Optional[Tuple[str, str]]:
  """(op name, op type) from "name:Type" in the event's name or tf_op stat."""
  m = _TF_OP.match(metadata_name) or _TF_OP.match(stats.get("tf_op", ""))
  return (m.group(1), m.group(2)) if m else None


def _plane_events(plane, device: str) -> List[_Raw]:
  out = []
  for line in plane.lines:
    for ev in line.events:
      md = plane.event_metadata[ev.metadata_id]
      stats = _stats(plane, ev.stats)
      op = _op_of(md.name, stats)
      if op is None:
        continue
      start_ns = line.timestamp_ns + ev.offset_ps // 1000
      out.append((device, op[0], op[1], start_ns, ev.duration_ps, stats))
  return out


def xplane_events(path: str, host: str = "") -> List[_Raw]:
  """The TF op events of one xplane file, devices prefixed with `host`."""
  space = _parse_space(path)
  out = []
  for plane in space.planes:
    if plane.name.startswith("/"):  # devices; not "Task Environment"
      out.extend(_plane_events(plane, host + plane.name))
  return out


def _to_event(raw: _Raw, t0_ns: int, transfer_fields) -> TraceEvent:
  device, name, op_type, start_ns, dur_ps, stats = raw
  start_s, duration_s = (start_ns - t0_ns) * 1e-9, max(dur_ps, 0) * 1e-12
  if not is_transfer_op(op_type):
    return TraceEvent(device, name, op_type, start_s, duration_s, OP)
  src, dst, nbytes = transfer_fields(stats, device, op_type)
  return TraceEvent(device, name, op_type, start_s, duration_s, TRANSFER,
                    nbytes, src, dst)


def read_xplanes(files: Sequence[str], source: str, transfer_fields) -> Trace:
  """Reads and merges the xplane files of one profile run.

  Args:
    files: `.xplane.pb` paths; with several, devices get the file's host.
    source: where they came from (for messages).
    transfer_fields: `(stats, device, op_type) -> (src, dst, nbytes)` for
      transfer ops (the reader's, shared with Chrome traces).

  Raises:
    TraceError: a file is empty or not an XSpace, or no TF op was traced.
  """
  raw = []
  for path in files:
    raw.extend(xplane_events(path, xplane_host(path) if len(files) > 1 else ""))
  if not raw:
    raise TraceError(f"{source}: the profile has no TF op events")
  t0_ns = min(r[3] for r in raw)
  return make_trace([_to_event(r, t0_ns, transfer_fields) for r in raw], source)
