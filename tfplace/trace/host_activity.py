"""Where a profiled step's host threads spent their time, per TF worker.

The TF profiler records, on each worker's host plane, one line per thread
with the executor's own events around the op kernels. Their self time
(each event less the events nested in it) is sorted by kind:

* "ops": op kernels ("name:Type"), but for the transfer kernels;
* "sends": `_Send`/`_HostSend` kernels. A send is a cheap store (~1 us)
  when the receiver has not asked for the tensor yet; when its RecvTensor
  request is already waiting, the send serializes and answers it there
  (40-90 us each on this project's one-core workers);
* "recv_issue": `ExecutorState::ProcessAsync::Start`, an async kernel (a
  `_Recv`) starting: the RecvTensor call it makes to the sender;
* "recv_done": `ExecutorState::ProcessAsync::Done`, its completion;
* "executor": the rest of `ExecutorState` (scheduling, passing outputs on);
* "other": the remaining events (RunGraph, callbacks).

The window is the profiled step: from the first op event to the last one,
over every file. A thread's "untraced" time is the window less its
top-level events: idle, or work the profiler does not record (gRPC's own
threads, RPC handlers). On a split step of the transformer on two one-core
workers this showed each worker issuing its ~250-290 Recvs for the first
6-12 ms of an 80 ms step before any op ran, and ~20 ms per worker in
answering sends (WORKSPACE_NOTES.md, issue 13).
"""

import collections
import dataclasses
import os
import re
from typing import Dict, List, Sequence, Tuple

import numpy as np

from tfplace.errors import TraceError

KINDS = ("ops", "sends", "recv_issue", "recv_done", "executor", "other")
# A send shorter than this only stored its tensor (no request waited).
CHEAP_SEND_S = 5e-6
_OP = re.compile(r"^([^:\s][^:]*):([A-Za-z_][\w>]*)$")
_SENDS = ("_Send", "_HostSend")
_RECVS = ("_Recv", "_HostRecv")


@dataclasses.dataclass(frozen=True)
class ThreadActivity:
  """One thread of one worker over the window.

  Attributes:
    worker: the worker's TF task, or its profile file's host.
    thread: the thread's name, without its id ("tf_Compute").
    self_s: kind -> self seconds (see the module docstring).
    counts: kind -> events.
    untraced_s: the window less the thread's top-level events.
    cheap_sends: sends shorter than `CHEAP_SEND_S`.
    median_s: kind -> median seconds of one event (whole, not self).
  """
  worker: str
  thread: str
  self_s: Dict[str, float]
  counts: Dict[str, int]
  untraced_s: float
  cheap_sends: int
  median_s: Dict[str, float]

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class HostActivity:
  """Every host thread of a profiled step.

  Attributes:
    window_s: the profiled step: first to last op event, over the files.
    threads: per worker, its threads by self time (most first).
  """
  window_s: float
  threads: Tuple[ThreadActivity, ...]

  def to_dict(self) -> dict:
    return {"window_s": self.window_s,
            "threads": [t.to_dict() for t in self.threads]}


def _kind(name: str) -> str:
  if name.startswith("ExecutorState::ProcessAsync::Start"):
    return "recv_issue"
  if name.startswith("ExecutorState::ProcessAsync::Done"):
    return "recv_done"
  if name.startswith("ExecutorState"):
    return "executor"
  m = _OP.match(name)
  if m is None:
    return "other"
  return "sends" if m.group(2) in _SENDS else (
      "recv_done" if m.group(2) in _RECVS else "ops")


def _lines(files: Sequence[str], warn: bool):
  """(worker, thread, line start ns, [(offset ps, duration ps, name)]) per
  host line of the readable files."""
  from tfplace.trace.xplane import readable_spaces, task_names, xplane_host
  where = os.path.dirname(files[0]) if files else "the profile"
  spaces, _ = readable_spaces(files, where, warn=warn)
  tasks = task_names([p for p, _ in spaces], []) if len(files) > 1 else {}
  for path, space in spaces:
    host = xplane_host(path)
    for plane in space.planes:
      if not plane.name.startswith("/host"):
        continue
      md = plane.event_metadata
      for line in plane.lines:
        events = [(e.offset_ps, e.duration_ps, md[e.metadata_id].name)
                  for e in line.events]
        if events:
          yield (tasks.get(host, host), line.name.split("/")[0],
                 line.timestamp_ns, events)


def _window(lines) -> Tuple[float, float]:
  ops = [(t, t + d) for _, _, events in lines for t, d, name in events
         if _OP.match(name)]
  if not ops:
    raise TraceError("the profile has no TF op events on a host thread")
  return min(a for a, _ in ops), max(b for _, b in ops)


def _thread(worker, thread, events, lo, hi) -> ThreadActivity:
  """Self time by kind of the events within [lo, hi] (ns)."""
  events = sorted(((max(t, lo), min(t + d, hi) - max(t, lo), n)
                   for t, d, n in events if t < hi and t + d > lo),
                  key=lambda e: (e[0], -e[1]))
  self_ns = collections.Counter()
  counts = collections.Counter()
  whole: Dict[str, List[float]] = collections.defaultdict(list)
  stack: List[Tuple[float, str]] = []  # (end, kind) of open events.
  covered, cover_end, cheap = 0.0, lo, 0
  for t, d, name in events:
    while stack and stack[-1][0] <= t:
      stack.pop()
    kind = _kind(name)
    if d <= 0 and kind == "other":
      continue  # Instant markers (thread-pool listeners).
    self_ns[kind] += d
    counts[kind] += 1
    whole[kind].append(d)
    if kind == "sends" and d < CHEAP_SEND_S * 1e9:
      cheap += 1
    if stack:
      self_ns[stack[-1][1]] -= d
    else:
      covered += max(0.0, t + d - max(t, cover_end))
      cover_end = max(cover_end, t + d)
    stack.append((t + d, kind))
  return ThreadActivity(
      worker=worker, thread=thread,
      self_s={k: self_ns[k] / 1e9 for k in KINDS if counts[k]},
      counts={k: counts[k] for k in KINDS if counts[k]},
      untraced_s=(hi - lo - covered) / 1e9, cheap_sends=cheap,
      median_s={k: float(np.median(whole[k])) / 1e9 for k in KINDS
                if counts[k]})


def host_activity(files: Sequence[str], warn: bool = True) -> HostActivity:
  """Host-thread activity of a TF profiler run (its `.xplane.pb` files, one
  per worker); threads with no event in the window are left out.

  Args:
    files: the run's `.xplane.pb` paths.
    warn: log each unreadable file skipped (`xplane.readable_spaces`);
      off where the trace was read, and warned of, first.

  Raises:
    TraceError: no readable file, or no op event on a host thread.
  """
  raw = list(_lines(files, warn))
  if not raw:
    where = os.path.dirname(files[0]) if files else "the profile"
    raise TraceError(f"{where}: the profile has no host thread events (did "
                     "TensorFlow run anything while the profiler was on?)")
  # Times in ns from the earliest line: absolute ns (~1.8e18) as floats
  # would round to 256 ns.
  base = min(start for _, _, start, _ in raw)
  lines = [(w, t, [(((start - base) * 1000 + off) / 1e3, dur / 1e3, name)
                   for off, dur, name in events])
           for w, t, start, events in raw]
  lo, hi = _window(lines)
  threads = [_thread(w, t, events, lo, hi) for w, t, events in lines]
  threads = [t for t in threads if t.counts]
  threads.sort(key=lambda t: (t.worker, -sum(t.self_s.values()), t.thread))
  return HostActivity(window_s=(hi - lo) / 1e9, threads=tuple(threads))


def _ms(seconds: float) -> str:
  return f"{seconds * 1e3:.2f}"


def format_host_activity(activity: HostActivity) -> str:
  """Markdown: self ms per kind and thread; then, per thread with sends or
  Recv issues, their count and median."""
  rows = [f"host threads over the profiled step "
          f"({_ms(activity.window_s)} ms), self ms:\n",
          "| worker | thread | " + " | ".join(KINDS) + " | untraced |",
          "|---|---|" + "---:|" * (len(KINDS) + 1)]
  notes = []
  for t in activity.threads:
    cells = [_ms(t.self_s[k]) if k in t.self_s else "-" for k in KINDS]
    rows.append(f"| {t.worker} | {t.thread} | " + " | ".join(cells) +
                f" | {_ms(t.untraced_s)} |")
    parts = []
    if "sends" in t.counts:
      parts.append(f"sends: {t.counts['sends']}, median "
                   f"{t.median_s['sends'] * 1e6:.1f} us, {t.cheap_sends} "
                   f"under {CHEAP_SEND_S * 1e6:.0f} us (stored before the "
                   f"receiver asked)")
    if "recv_issue" in t.counts:
      parts.append(f"Recv issues: {t.counts['recv_issue']}, median "
                   f"{t.median_s['recv_issue'] * 1e6:.1f} us")
    if parts:
      notes.append(f"- {t.worker} {t.thread}: " + "; ".join(parts))
  return "\n".join(rows + [""] + notes) + "\n"
