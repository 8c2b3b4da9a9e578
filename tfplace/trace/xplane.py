"""Reading TF profiler `.xplane.pb` files (XSpace protos) into trace events.

An XSpace has one plane per device ("/host:CPU", "/device:GPU:0", ...); each
plane has lines (threads, streams) of timed events whose metadata name a TF
op as "name:Type" (host threads) or carry it in a "tf_op" stat (GPU kernels).
The proto is read directly rather than through TF's trace-viewer converter,
which keeps the op name of only some events.

A profile run of a TF server cluster has one file per worker
(`<host>_<port>.xplane.pb`); `read_xplanes` merges them on the hosts' clocks
(event times are absolute, in ns since the epoch) and names each file's
devices by its TF task: from the run's `tasks.json` (written by `tfplace
measure`), else from the task its `_Send`/`_Recv` events send from or
receive on, else by the file's host ("127.0.0.1_6009/host:CPU"). A task's
host plane ("/host:CPU": the profiler records threads, not logical CPUs)
becomes its CPU device, "/job:worker/replica:0/task:0/device:CPU:0", when
its transfers name one CPU device (as for `tfplace`'s workers), else
"<task>/host:CPU", with the transfers of its CPU devices renamed to match.

One file alone (a single process traced with `tf.profiler`) keeps its plane
names ("/host:CPU", "/device:GPU:0"); its transfers' ends are renamed to
them ("/job:localhost/replica:0/task:0/device:GPU:0" -> "/device:GPU:0";
the one CPU device its transfers name -> "/host:CPU"), so a transfer joins
the timelines its ops are on. Two or more CPU devices keep their names (the
host plane does not say which of them an op ran on), and so do all ends of
a file whose transfers name several tasks (a cluster's client).
"""

import collections
import dataclasses
import json
import os
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from absl import logging

from tfplace.errors import TraceError
from tfplace.trace.trace import (OP, TRANSFER, SkippedFile, StepMark, Trace,
                                 TraceEvent, is_transfer_op, make_trace)

# "name:Type": node names hold no ":"; a type starts with a letter or "_".
_TF_OP = re.compile(r"^([^:\s][^:]*):([A-Za-z_][\w>]*)$")
_TASK = re.compile(r"^(/job:[^/]+/replica:\d+/task:\d+)(/|$)")
# ".../device:GPU:0" -> "device:GPU:0" (a device's name without its task).
_DEVICE_SUFFIX = re.compile(r"(?:^|/)(device:[A-Za-z_]+:\d+)$")
# Raw event: (device, name, op type, start ns, duration ps, stats).
_Raw = Tuple[str, str, str, int, int, Dict[str, str]]
# Raw step marker: (name, step number, start ns, duration ps).
_Mark = Tuple[str, int, int, int]
_STEP_NUM = "step_num"


def xplane_host(path: str) -> str:
  """The host an `.xplane.pb` file belongs to: its name ("127.0.0.1_6009")."""
  return os.path.basename(path)[:-len(".xplane.pb")]


def parse_space(path: str):
  """The XSpace proto of an `.xplane.pb` file; raises TraceError if it is
  empty or unreadable."""
  import tfplace  # noqa: F401  (env before TF)
  from google.protobuf import message
  from tensorflow.tsl.profiler.protobuf import xplane_pb2
  if os.path.getsize(path) == 0:
    raise TraceError(f"{path}: the file is empty")
  space = xplane_pb2.XSpace()
  try:
    with open(path, "rb") as f:
      space.ParseFromString(f.read())
  except OSError as e:
    raise TraceError(f"{path}: cannot be read ({e.strerror})") from None
  except (message.DecodeError, RuntimeError, ValueError) as e:
    raise TraceError(
        f"{path}: not a readable TF profiler xplane ({e})") from None
  return space


def readable_spaces(files: Sequence[str], source: str, warn: bool = True
                    ) -> Tuple[List[Tuple[str, Any]], Tuple[SkippedFile, ...]]:
  """((path, XSpace) of each readable file of one profile run, the files
  skipped).

  A run of several files (one per worker) is read without a file that is
  empty or unreadable (a worker's profile cut short as it was written):
  one warning line names the file and why, and the other workers' files
  are read.

  Args:
    files: the run's `.xplane.pb` paths.
    source: where they came from (for messages).
    warn: log the skipped files (off where the caller warned already).

  Raises:
    TraceError: no file is readable (one file alone: why it is not).
  """
  if len(files) == 1:
    return [(files[0], parse_space(files[0]))], ()
  spaces, errors = [], []
  for path in files:
    try:
      spaces.append((path, parse_space(path)))
    except TraceError as e:
      errors.append(SkippedFile(path, str(e).removeprefix(f"{path}: ")))
  if not spaces:
    raise TraceError(f"{source}: none of its {len(files)} xplane files is "
                     "readable: " + "; ".join(f"{e.path}: {e.why}"
                                              for e in errors))
  for error in errors if warn else ():
    logging.warning("skipped a worker's file, %s: %s; the trace covers the "
                    "other %d of the run's %d files", error.path, error.why,
                    len(spaces), len(files))
  return spaces, tuple(errors)


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
  return _space_events(parse_space(path), host)[0]


def _space_events(space, host: str) -> Tuple[List[_Raw], List[_Mark]]:
  """(TF op events, step markers) of one file's XSpace."""
  events, marks = [], []
  for plane in space.planes:
    if plane.name.startswith("/"):  # devices; not "Task Environment"
      events.extend(_plane_events(plane, host + plane.name))
      marks.extend(_plane_step_marks(plane))
  return events, marks


def _plane_step_marks(plane) -> List[_Mark]:
  """The events that carry a `step_num` stat: TraceMe step markers (Keras's
  "train" per batch, `tf.profiler.experimental.Trace(..., step_num=i)`)."""
  ids = [k for k, m in plane.stat_metadata.items() if m.name == _STEP_NUM]
  if not ids:
    return []
  out = []
  for line in plane.lines:
    for ev in line.events:
      num = next((s for s in ev.stats if s.metadata_id == ids[0]), None)
      if num is None:
        continue
      kind = num.WhichOneof("value")
      try:
        step = int(getattr(num, kind)) if kind else 0
      except (TypeError, ValueError):
        continue
      start_ns = line.timestamp_ns + ev.offset_ps // 1000
      out.append((plane.event_metadata[ev.metadata_id].name, step, start_ns,
                  ev.duration_ps))
  return out


def _why_no_ops(spaces: Sequence[Any]) -> str:
  """What a profile without TF op events holds instead, in words."""
  eager = 0
  for space in spaces:
    for plane in space.planes:
      names = {k: m.name for k, m in plane.event_metadata.items()}
      eager += sum(names.get(ev.metadata_id, "").startswith(
          "EagerLocalExecute") for line in plane.lines for ev in line.events)
  if eager:
    return (f"only {eager} eager op runs, which have no op names: trace "
            "a tf.function (or a Keras fit) to see its ops")
  return ("did TensorFlow run anything between tf.profiler.experimental."
          "start and stop?")


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
    TraceError: no file is readable (of several, an unreadable one is
      skipped with a warning, and listed in the trace's `skipped_files`:
      `readable_spaces`), or no TF op was traced.
  """
  raw, raw_marks = [], []
  merged = len(files) > 1  # Workers keep their task names without a file.
  spaces, skipped = readable_spaces(files, source)
  for path, space in spaces:
    events, marks = _space_events(space, xplane_host(path) if merged else "")
    raw.extend(events)
    raw_marks.extend(marks)
  if not raw:
    raise TraceError(f"{source}: the profile has no TF op events "
                     f"({_why_no_ops([s for _, s in spaces])})")
  files = [path for path, _ in spaces]
  t0_ns = min(r[3] for r in raw)
  events = [_to_event(r, t0_ns, transfer_fields) for r in raw]
  if merged:
    events = _by_task(events, task_names(files, events))
  else:
    events = _ends_on_planes(events)
  marks = [StepMark(name, step, (start - t0_ns) * 1e-9,
                    (start - t0_ns) * 1e-9 + max(dur, 0) * 1e-12)
           for name, step, start, dur in raw_marks]
  return make_trace(events, source, marks, skipped)


def _plane_names(events: Sequence[TraceEvent]) -> Dict[str, str]:
  """{transfer end: plane} for one process (see the module docstring);
  empty when its transfers name devices of several tasks (a client of a
  cluster: their "device:CPU:0"s are not this host's)."""
  ends = {d for e in events if e.kind == TRANSFER
          for d in (e.src_device, e.dst_device) if d}
  if len({_task_of(d) for d in ends if _task_of(d)}) > 1:
    return {}
  planes = {e.device for e in events}
  rename = {}
  for end in ends:
    m = _DEVICE_SUFFIX.search(end)
    if m and "/" + m.group(1) in planes:
      rename[end] = "/" + m.group(1)
  cpus = [d for d in ends if (m := _DEVICE_SUFFIX.search(d))
          and m.group(1).startswith("device:CPU:")]
  if len(cpus) == 1 and "/host:CPU" in planes:
    rename[cpus[0]] = "/host:CPU"
  return rename


def _ends_on_planes(events: Sequence[TraceEvent]) -> List[TraceEvent]:
  """One process's events, transfer ends named as its planes."""
  rename = _plane_names(events)
  if not rename:
    return list(events)
  return [dataclasses.replace(
      e, src_device=rename.get(e.src_device, e.src_device),
      dst_device=rename.get(e.dst_device, e.dst_device))
          if e.kind == TRANSFER else e for e in events]


def task_names(files: Sequence[str], events: Sequence[TraceEvent]
               ) -> Dict[str, str]:
  """{file host: TF task} ("127.0.0.1_6009" -> "/job:worker/replica:0/task:0")
  from the run's tasks.json, else from each host's transfers."""
  from tfplace.measurement.remote_profile import TASKS_FILE, TASKS_FORMAT
  path = os.path.join(os.path.dirname(files[0]), TASKS_FILE)
  hosts = {xplane_host(f) for f in files}
  try:
    with open(path) as f:
      doc = json.load(f)
    if doc.get("format") == TASKS_FORMAT and isinstance(doc.get("tasks"), dict):
      return {h: str(t) for h, t in doc["tasks"].items() if h in hosts}
  except (OSError, ValueError, AttributeError):
    pass
  votes: Dict[str, collections.Counter] = collections.defaultdict(
      collections.Counter)
  for e in events:
    host = e.device.split("/", 1)[0]
    end = e.src_device if e.op_type.startswith(("_Send", "_HostSend")) else (
        e.dst_device if e.op_type.startswith(("_Recv", "_HostRecv")) else None)
    if e.kind == TRANSFER and end and _task_of(end):
      votes[host][_task_of(end)] += 1
  found = {h: v.most_common(1)[0][0] for h, v in votes.items()}
  unique = collections.Counter(found.values())
  return {h: t for h, t in found.items() if unique[t] == 1}


def _task_of(device: str) -> Optional[str]:
  """"/job:w/replica:0/task:1/device:CPU:0" -> "/job:w/replica:0/task:1"."""
  m = _TASK.match(device)
  return m.group(1) if m else None


def _by_task(events: Sequence[TraceEvent],
             tasks: Dict[str, str]) -> List[TraceEvent]:
  """Events with devices named by task (see the module docstring)."""
  cpus: Dict[str, set] = collections.defaultdict(set)
  for e in events:
    for end in (e.src_device, e.dst_device):
      if end and _task_of(end) and "/device:CPU:" in end:
        cpus[_task_of(end)].add(end)
  rename: Dict[str, str] = {}
  for e in events:
    host, _, plane = e.device.partition("/")
    task = tasks.get(host)
    if task is None or e.device in rename:
      continue
    if plane == "host:CPU":
      named = sorted(cpus.get(task, ()))
      rename[e.device] = (named[0] if len(named) == 1 else
                          task + "/device:CPU:0" if not named else
                          task + "/host:CPU")
    else:
      rename[e.device] = f"{task}/{plane}"
  hosts = {d for d in rename.values() if d.endswith("/host:CPU")}

  def end(device):
    task = _task_of(device) if device else None
    folded = f"{task}/host:CPU" if task else None
    return folded if folded in hosts and "/device:CPU:" in device else device

  return [dataclasses.replace(
      e, device=rename.get(e.device, e.device), src_device=end(e.src_device),
      dst_device=end(e.dst_device)) for e in events]
