"""Reading profiler traces into a `Trace`.

`load_trace(path)` accepts:
  * a TF profiler log directory, as written by
    `tf.profiler.experimental.start(logdir)` / `stop()`
    (`<logdir>/plugins/profile/<run>/*.xplane.pb`; the newest run is read;
    also `<log_dir>/train/plugins/profile/<run>/`, as Keras's TensorBoard
    callback writes it), a run directory, or one `.xplane.pb` file, read
    by `tfplace.trace.xplane`.
    A run with one file per host (`<host>.xplane.pb`, as
    `tf.profiler.experimental.client.trace` writes for the workers of a TF
    server cluster) is merged; each device is then prefixed with the file's
    host, e.g. "127.0.0.1_6009/host:CPU". A worker's file that is empty or
    cut short is skipped with a warning naming it; the others are read. A directory written by
    `tfplace measure --trace_dir` also holds `step_stats.pb` (the per-op,
    per-device timeline of a FULL_TRACE step); that file is read instead, as
    the client-side profiler cannot see ops that ran in server processes;
  * a Chrome-trace JSON (`.json` or `.json.gz`): complete ("X") events, whose
    device is the process name (or `args.device`);
  * a saved `StepStats` or `RunMetadata` proto, binary (`.pb`) or text
    (`.pbtxt`), e.g. `run_metadata.step_stats` from a `FULL_TRACE` run.

From a TF profiler (xplane) trace only TensorFlow ops are kept (events naming
an op as `name:Type`), not the runtime's own bookkeeping; on CPU-only hosts the
device is the host ("/host:CPU"), since the profiler records threads, not
logical devices. `_SOURCE`/`_SINK` in step stats are skipped.
"""

import glob
import gzip
import json
import os
import re
from typing import Any, Dict, List, Optional, Tuple

from tfplace.errors import TraceError
from tfplace.measurement.runner import STEP_STATS_FILE
from tfplace.measurement.timing import label_op_type
from tfplace.trace.trace import (CLIENT, OP, TRANSFER, TraceEvent, Trace,
                                 is_transfer_op, make_trace)

_SKIPPED_NODES = ("_SOURCE", "_SINK")
_DEVICE_IN_TEXT = re.compile(r"(/job:[^\s,;()@]+|/device:[^\s,;()@]+)")
_LABEL_BYTES = re.compile(r"\[(\d+)B\]|\b(\d+) bytes\b")
_RECV_TENSOR = re.compile(r"from (\S+) to (\S+)")
_STREAM_SUFFIX = re.compile(r"^(.*?/device:[A-Za-z_]+:\d+)(/.*)?$")


def load_trace(path: str) -> Trace:
  """Reads a profiler trace from `path` (see the module docstring for forms).

  Args:
    path: a profile log directory, an `.xplane.pb`, a Chrome-trace JSON
      (`.json`, `.json.gz`), or a StepStats/RunMetadata (`.pb`, `.pbtxt`).

  Returns:
    The trace, starting at time 0.

  Raises:
    TraceError: if the path is missing, empty, corrupt, or has no events.
  """
  if not os.path.exists(path):
    raise TraceError(f"{path}: no such file or directory")
  if os.path.isdir(path):
    step_stats = os.path.join(path, STEP_STATS_FILE)
    if os.path.isfile(step_stats):
      return load_trace(step_stats)
    return _load_xplanes(_xplane_files(path), path)
  if os.path.getsize(path) == 0:
    raise TraceError(f"{path}: the file is empty")
  if path.endswith(".xplane.pb"):
    return _load_xplanes([path], path)
  with open(path, "rb") as f:
    data = f.read()
  if path.endswith(".gz"):
    try:
      data = gzip.decompress(data)
    except (OSError, EOFError) as e:
      raise TraceError(f"{path}: not a valid gzip file ({e})") from None
  if path.endswith((".json", ".json.gz")) or data.lstrip()[:1] in (b"{", b"["):
    return chrome_trace_to_trace(_parse_json(data, path), path)
  return step_stats_to_trace(_parse_step_stats(data, path), path)


def xplane_files(path: str) -> List[str]:
  """The `.xplane.pb` files at `path`: the file itself, or the newest
  profile run under a log directory.

  Raises:
    TraceError: `path` is neither (host threads need the TF profiler's
      xplanes; StepStats and Chrome traces have none).
  """
  if not os.path.exists(path):
    raise TraceError(f"{path}: no such file or directory")
  if os.path.isdir(path):
    return _xplane_files(path)
  if path.endswith(".xplane.pb"):
    return [path]
  raise TraceError(f"{path}: host threads are read from a TF profiler log "
                   "directory or an .xplane.pb file")


def _parse_json(data: bytes, source: str) -> Any:
  try:
    return json.loads(data)
  except (ValueError, UnicodeDecodeError) as e:
    raise TraceError(f"{source}: not valid JSON ({e})") from None


# ---- TF profiler (xplane) -------------------------------------------------


def _xplane_files(directory: str) -> List[str]:
  """The `.xplane.pb` files of the newest run under a profile directory:
  the directory itself, its `plugins/profile` (or `profile`, given
  `plugins`), or (the Keras TensorBoard
  callback's `log_dir`) a subfolder's `plugins/profile`, e.g. `train/`."""
  files = glob.glob(os.path.join(directory, "*.xplane.pb"))
  if files:
    return sorted(files)
  for roots in ([os.path.join(directory, "plugins", "profile")],
                [os.path.join(directory, "profile")], [directory],
                glob.glob(os.path.join(directory, "*", "plugins", "profile"))):
    runs = [d for root in roots for d in glob.glob(os.path.join(root, "*"))
            if glob.glob(os.path.join(d, "*.xplane.pb"))]
    if runs:  # run folders are named by their start time
      newest = max(runs, key=lambda d: (os.path.basename(d), d))
      return sorted(glob.glob(os.path.join(newest, "*.xplane.pb")))
  raise TraceError(f"{directory}: no profile run found (expected "
                   "plugins/profile/<run>/*.xplane.pb, as written by "
                   "tf.profiler.experimental.start/stop, or "
                   "<log_dir>/train/plugins/profile/<run>/ by Keras's "
                   "TensorBoard callback with profile_batch)")


def _load_xplanes(files: List[str], source: str) -> Trace:
  from tfplace.trace.xplane import read_xplanes
  return read_xplanes(files, source, _transfer_fields)


# ---- Chrome trace JSON ----------------------------------------------------


def _device_from_process(name: str) -> str:
  """"/job:w/.../device:CPU:0 Compute" -> the device; "vm /host:CPU" -> "/host:CPU"."""
  m = re.search(r"(/\S+)", name)
  return m.group(1) if m else name


def _op_identity(ev: Dict[str, Any]) -> Optional[Tuple[str, str]]:
  """(op name, op type) named in an event's args, or None."""
  args = ev.get("args") or {}
  for key in ("long_name", "tf_op"):
    value = args.get(key)
    if isinstance(value, str) and ":" in value:
      name, op_type = value.rsplit(":", 1)
      return name, op_type
  if isinstance(args.get("name"), str):
    op_type = args.get("op_type") or args.get("op") or ev.get("name", "")
    return args["name"], str(op_type)
  return None


def _transfer_fields(args: Dict[str, Any], device: str, op_type: str):
  """(src, dst, nbytes) of a transfer event from its args."""
  src, dst = args.get("src_device"), args.get("dst_device")
  key = args.get("key")
  if (src is None or dst is None) and isinstance(key, str) and key.count(";") >= 2:
    parts = key.split(";")  # "src;incarnation;dst;edge_name;frame:iter"
    src, dst = src or parts[0], dst or parts[2]
  if src is None and dst is None:
    if op_type.startswith(("_Send", "_HostSend")):
      src = device
    elif op_type.startswith(("_Recv", "_HostRecv", "RecvTensor")):
      dst = device
  elif src is not None and src == dst:
    # A key from a device to itself: the step's fetch to (or feed from) the
    # session's client, which TF routes through the master's device.
    if op_type.startswith(("_Send", "_HostSend")):
      dst = CLIENT
    elif op_type.startswith(("_Recv", "_HostRecv")):
      src = CLIENT
  nbytes = args.get("nbytes", args.get("bytes", 0))
  try:
    nbytes = int(nbytes)
  except (TypeError, ValueError):
    nbytes = 0
  return src, dst, nbytes


def _chrome_event(ev, device: str, tf_ops_only: bool,
                  t0_us: float) -> Optional[TraceEvent]:
  args = ev.get("args") or {}
  if tf_ops_only and not ("long_name" in args or "tf_op" in args):
    return None
  ident = _op_identity(ev)
  if ident is None:
    ident = (str(ev.get("name", "")), str(ev.get("name", "")))
  name, op_type = ident
  if name in _SKIPPED_NODES:
    return None
  device = str(args.get("device") or device)
  kind = args.get("kind")
  if kind not in (OP, TRANSFER):
    kind = TRANSFER if is_transfer_op(op_type) else OP
  start_s = (float(ev["ts"]) - t0_us) * 1e-6
  duration_s = max(float(ev.get("dur", 0.0)), 0.0) * 1e-6
  if kind == OP:
    nbytes = int(args.get("nbytes", 0) or 0)
    return TraceEvent(device, name, op_type, start_s, duration_s, OP, nbytes)
  src, dst, nbytes = _transfer_fields(args, device, op_type)
  return TraceEvent(device, name, op_type, start_s, duration_s, TRANSFER,
                    nbytes, src, dst)


def chrome_trace_to_trace(doc: Any, source: str) -> Trace:
  """Converts a parsed Chrome-trace document (dict or event list) to a Trace.

  Args:
    doc: `{"traceEvents": [...]}` or a bare list of events.
    source: where it came from (for messages).

  Raises:
    TraceError: if it is not a Chrome trace or has no complete events.
  """
  events = doc.get("traceEvents") if isinstance(doc, dict) else doc
  if not isinstance(events, list):
    raise TraceError(f"{source}: not a Chrome trace (no 'traceEvents' list)")
  processes = {}
  for ev in events:
    if isinstance(ev, dict) and ev.get("ph") == "M" and ev.get("name") == "process_name":
      processes[ev.get("pid")] = str((ev.get("args") or {}).get("name", ""))
  complete = [ev for ev in events if isinstance(ev, dict) and ev.get("ph") == "X"]
  # A TF profiler trace names ops in args; its other events are runtime noise.
  tf_ops_only = any(isinstance(ev.get("args"), dict) and (
      "long_name" in ev["args"] or "tf_op" in ev["args"]) for ev in complete)
  try:
    t0_us = min((float(ev["ts"]) for ev in complete), default=0.0)
  except (KeyError, TypeError, ValueError) as e:
    raise TraceError(f"{source}: a complete event has no numeric 'ts' ({e})") from None
  out = []
  for ev in complete:
    pid = ev.get("pid")
    device = _device_from_process(processes.get(pid, f"pid {pid}"))
    try:
      te = _chrome_event(ev, device, tf_ops_only, t0_us)
    except (KeyError, TypeError, ValueError) as e:
      raise TraceError(f"{source}: malformed trace event {ev!r} ({e})") from None
    if te is not None:
      out.append(te)
  return make_trace(out, source)


# ---- StepStats / RunMetadata ----------------------------------------------


def _looks_like_step_stats(step_stats) -> bool:
  return bool(step_stats.dev_stats) and all(
      ds.device.startswith("/") for ds in step_stats.dev_stats)


def _parse_step_stats(data: bytes, source: str):
  """Parses binary or text StepStats or RunMetadata bytes into StepStats."""
  import tfplace  # noqa: F401  (env before TF)
  from google.protobuf import message, text_format
  from tensorflow.core.framework import step_stats_pb2
  from tensorflow.core.protobuf import config_pb2
  errors = []
  for make, get in ((config_pb2.RunMetadata, lambda m: m.step_stats),
                    (step_stats_pb2.StepStats, lambda m: m)):
    for parse in ("binary", "text"):
      proto = make()
      try:
        if parse == "binary":
          proto.ParseFromString(data)
        else:
          text_format.Parse(data.decode("utf-8"), proto)
      except (message.DecodeError, text_format.ParseError, UnicodeDecodeError,
              ValueError, RuntimeError) as e:
        errors.append(f"{make.__name__} ({parse}): {e}")
        continue
      if _looks_like_step_stats(get(proto)):
        return get(proto)
  raise TraceError(f"{source}: not a Chrome-trace JSON, StepStats or "
                   f"RunMetadata proto with step stats ({_why_not(data, errors)})")


def _why_not(data: bytes, errors: List[str]) -> str:
  """Why bytes are not step stats, in words a user can act on."""
  try:
    data.decode("utf-8")
  except UnicodeDecodeError:
    return ("binary, with no step stats in it: a model or graph file? "
            "Trace a step with `tfplace measure --trace_dir DIR` or "
            "tf.profiler, then give DIR")
  return errors[-1] if errors else "empty"


def _base_device(device: str) -> str:
  """".../device:GPU:0/stream:7" -> ".../device:GPU:0"."""
  m = _STREAM_SUFFIX.match(device)
  return m.group(1) if m else device


def _node_times_ns(ns) -> Tuple[int, int]:
  if ns.all_start_nanos:
    return ns.all_start_nanos, ns.all_end_rel_nanos
  return ns.all_start_micros * 1000, ns.all_end_rel_micros * 1000


def _node_bytes(ns) -> int:
  label_bytes = _LABEL_BYTES.search(ns.timeline_label)
  if label_bytes:
    return int(label_bytes.group(1) or label_bytes.group(2))
  return sum(o.tensor_description.allocation_description.requested_bytes
             for o in ns.output)


def _host_of(device: str) -> str:
  return re.sub(r"/device:[A-Za-z_]+:\d+$", "/device:CPU:0", device)


def _step_transfer(ns, device: str, op_type: str):
  """(src, dst) of a transfer node on `device`."""
  label = ns.timeline_label
  m = _RECV_TENSOR.search(label)
  if m:
    return m.group(1), m.group(2)
  if "HtoD" in label or "HtoD" in op_type:
    return _host_of(device), device
  if "DtoH" in label or "DtoH" in op_type:
    return device, _host_of(device)
  others = [d for d in _DEVICE_IN_TEXT.findall(label) if d != device]
  other = others[0] if others else None
  if op_type.startswith(("_Send", "_HostSend")):
    return device, other
  return other, device


def _node_event(ns, raw_device: str, t0_ns: int) -> Optional[TraceEvent]:
  if ns.node_name in _SKIPPED_NODES:
    return None
  device = _base_device(raw_device)
  op_type = (label_op_type(ns.timeline_label)
             or ns.node_name.split(":")[0])
  if raw_device.endswith("/memcpy") or "MEMCPY" in ns.timeline_label:
    op_type = op_type if is_transfer_op(op_type) else "MEMCPY"
  start_ns, dur_ns = _node_times_ns(ns)
  start_s, duration_s = (start_ns - t0_ns) * 1e-9, max(dur_ns, 0) * 1e-9
  nbytes = _node_bytes(ns)
  if not is_transfer_op(op_type):
    return TraceEvent(device, ns.node_name, op_type, start_s, duration_s, OP, nbytes)
  src, dst = _step_transfer(ns, device, op_type)
  return TraceEvent(device, ns.node_name, op_type, start_s, duration_s,
                    TRANSFER, nbytes, src, dst)


def step_stats_to_trace(step_stats, source: str) -> Trace:
  """Converts a `StepStats` proto to a Trace.

  Per-stream GPU timelines (".../stream:N") are dropped when the aggregate
  ".../stream:all" is present, so each kernel counts once.

  Args:
    step_stats: a `tensorflow.core.framework.step_stats_pb2.StepStats`.
    source: where it came from (for messages).
  """
  devices = {ds.device for ds in step_stats.dev_stats}
  has_all = {_base_device(d) for d in devices if d.endswith("/stream:all")}
  kept = [ds for ds in step_stats.dev_stats
          if not (re.search(r"/stream:\d+$", ds.device) and
                  _base_device(ds.device) in has_all)]
  starts = [_node_times_ns(ns)[0] for ds in kept for ns in ds.node_stats]
  t0_ns = min(starts) if starts else 0
  events = []
  for ds in kept:
    for ns in ds.node_stats:
      ev = _node_event(ns, ds.device, t0_ns)
      if ev is not None:
        events.append(ev)
  return make_trace(events, source)
