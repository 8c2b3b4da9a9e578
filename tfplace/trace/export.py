"""Chrome-trace / Perfetto JSON export of a `Trace`.

One process per device (thread "ops"), and one more process, "transfers",
with one thread per (source -> destination) pair. Events are complete ("X")
events with times in microseconds, named by op name (the op type and the
other `TraceEvent` fields are in `args`), so `tfplace.trace.reader.load_trace` reads the file back to the
same events. The output opens in https://ui.perfetto.dev and chrome://tracing.
"""

import gzip
import json
import os
from typing import Any, Dict, List, Optional

from tfplace.errors import TraceError
from tfplace.io_utils import atomic_write
from tfplace.trace.trace import OP, Trace, TraceEvent

TRANSFERS_PROCESS = "transfers"
PRODUCER = "tfplace"


def _meta(name: str, pid: int, args: Dict[str, Any],
          tid: Optional[int] = None) -> Dict[str, Any]:
  ev = {"name": name, "ph": "M", "pid": pid, "args": args}
  if tid is not None:
    ev["tid"] = tid
  return ev


def _complete(e: TraceEvent, pid: int, tid: int) -> Dict[str, Any]:
  args = {"name": e.name, "op_type": e.op_type, "kind": e.kind,
          "device": e.device, "nbytes": e.nbytes}
  if e.kind != OP:
    args.update(src_device=e.src_device, dst_device=e.dst_device)
  return {"name": e.name, "cat": e.kind,
          "ph": "X", "pid": pid, "tid": tid, "ts": round(e.start_s * 1e6, 3),
          "dur": round(e.duration_s * 1e6, 3), "args": args}


def to_chrome_trace(trace: Trace) -> Dict[str, Any]:
  """The trace as a Chrome-trace JSON document (a dict ready for json.dump)."""
  devices = trace.devices()
  pids = {d: i + 1 for i, d in enumerate(devices)}
  transfer_pid = len(devices) + 1
  pairs = sorted({(e.src_device or "?", e.dst_device or "?")
                  for e in trace.transfers()})
  tids = {p: i for i, p in enumerate(pairs)}
  events: List[Dict[str, Any]] = []
  for d, pid in pids.items():
    events.append(_meta("process_name", pid, {"name": d}))
    events.append(_meta("process_sort_index", pid, {"sort_index": pid}))
    events.append(_meta("thread_name", pid, {"name": "ops"}, tid=0))
  if pairs:
    events.append(_meta("process_name", transfer_pid, {"name": TRANSFERS_PROCESS}))
    events.append(_meta("process_sort_index", transfer_pid,
                        {"sort_index": transfer_pid}))
    for (src, dst), tid in tids.items():
      events.append(_meta("thread_name", transfer_pid,
                          {"name": f"{src} -> {dst}"}, tid=tid))
  for e in trace.events:
    if e.kind == OP:
      events.append(_complete(e, pids[e.device], 0))
    else:
      tid = tids[(e.src_device or "?", e.dst_device or "?")]
      events.append(_complete(e, transfer_pid, tid))
  return {"traceEvents": events, "displayTimeUnit": "ms",
          "otherData": {"source": trace.source, "producer": PRODUCER}}


def write_perfetto(trace: Trace, path: str) -> None:
  """Writes the trace as Chrome-trace JSON (`.json`, or gzipped `.json.gz`).

  The file is written atomically: on any error an existing file is untouched.

  Args:
    trace: the trace.
    path: output path ending in `.json` or `.json.gz`.

  Raises:
    TraceError: if the extension is neither.
  """
  check_perfetto_path(path)
  data = json.dumps(to_chrome_trace(trace), separators=(",", ":")).encode("utf-8")
  if path.endswith(".gz"):
    data = gzip.compress(data, mtime=0)
  atomic_write(path, data)


def check_perfetto_path(path: str) -> None:
  """Raises TraceError unless `path` ends in `.json` or `.json.gz`."""
  if not path.endswith((".json", ".json.gz")):
    raise TraceError(f"{path}: a Perfetto/Chrome trace must end in .json or .json.gz")


def check_replaceable(path: str, flag: str = "--perfetto") -> None:
  """Raises TraceError if `path` holds a file that is not a trace tfplace
  exported (a placement, a cluster JSON, the user's own Chrome trace):
  writing the export over it would lose it. A previous export is replaced.
  """
  if not os.path.isfile(path) or os.path.getsize(path) == 0:
    return
  try:
    with open(path, "rb") as f:
      data = f.read()
    if path.endswith(".gz"):
      data = gzip.decompress(data)
    doc = json.loads(data)
    ours = (isinstance(doc, dict) and isinstance(doc.get("otherData"), dict)
            and doc["otherData"].get("producer") == PRODUCER)
  except (OSError, EOFError, ValueError, UnicodeDecodeError):
    ours = False
  if not ours:
    raise TraceError(f"{flag} {path} exists and is not a trace tfplace "
                     "exported: remove it or write to another file (it "
                     "would be lost)")
