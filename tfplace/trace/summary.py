"""Summaries of a trace: busy time, idle gaps, transfers, top ops, critical path.

Busy time on a device is the length of the union of its op intervals (ops
that overlap, e.g. on several threads of one host, count once). Transfers are
counted per (source, destination) device pair and are not part of any
device's busy time.

The critical path is an approximation read off the timeline, not the graph:
starting from the event that ends last, it repeatedly steps back to the event
that most recently ended before the current one started and could have fed
it: an event on the same device, a transfer into that device, or (for a
transfer) an event on its source device. The chain's summed durations are its
busy time; the rest of its span is waiting.
"""

import bisect
import collections
import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple, Union

from tfplace.trace import steps as steps_lib
from tfplace.trace.trace import OP, TRANSFER, SkippedFile, Trace

_EPS = 1e-12


@dataclasses.dataclass(frozen=True)
class DeviceUsage:
  """How one device spent the trace.

  Attributes:
    device: the device.
    n_ops: number of op events on it.
    busy_s: length of the union of its op intervals.
    busy_pct: busy_s as a percentage of the trace span.
    idle_gaps: number of gaps between its busy intervals (leading and trailing
      idle time, before its first op and after its last, are not gaps).
    idle_gap_s: total length of those gaps.
    largest_gap_s: the longest gap (0 if none).
  """
  device: str
  n_ops: int
  busy_s: float
  busy_pct: float
  idle_gaps: int
  idle_gap_s: float
  largest_gap_s: float


@dataclasses.dataclass(frozen=True)
class TransferStats:
  """Transfers from one device to another ("?" where a side is unknown)."""
  src_device: str
  dst_device: str
  count: int
  nbytes: int
  time_s: float


@dataclasses.dataclass(frozen=True)
class OpTime:
  """Total time of one op (summed over its events) on one device."""
  name: str
  op_type: str
  device: str
  count: int
  total_s: float


@dataclasses.dataclass(frozen=True)
class PathStep:
  """One event on the critical path (transfers: with their end devices)."""
  name: str
  op_type: str
  device: str
  kind: str
  start_s: float
  duration_s: float
  src_device: Optional[str] = None
  dst_device: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class PathSegment:
  """Consecutive critical-path events on one device (or one transfer link).

  Attributes:
    device: the device its events ran on.
    kind: "op" or "transfer".
    start_s: start of its first event.
    end_s: end of its last event.
    busy_s: summed durations of its events.
    n_events: how many events it has.
    n_trivial: how many of them are trivial ops (Const, Identity, NoOp, ...).
    longest: name of its longest non-trivial event ("" if all are trivial).
    longest_type: that event's op type.
    longest_s: that event's duration.
    src_device: for transfers, where the first one came from.
    dst_device: for transfers, where the first one went.
  """
  device: str
  kind: str
  start_s: float
  end_s: float
  busy_s: float
  n_events: int
  n_trivial: int
  longest: str
  longest_type: str
  longest_s: float
  src_device: Optional[str] = None
  dst_device: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class TraceSummary:
  """What a trace shows (see the module docstring for definitions).

  Attributes:
    source: where the trace came from.
    n_events: number of events.
    span_s: first start to last end.
    devices: per-device usage, sorted by device.
    transfers: per device pair, sorted by (src, dst).
    top_ops: the ops with the most total time, longest first.
    critical_path: the approximate critical path, in time order.
    critical_path_busy_s: summed durations along the critical path.
    critical_path_segments: the critical path as runs of events on one
      device, in time order.
    top_k: how many rows each list shows when printed.
    max_op_runs: the most times one op ran on one device in what was
      summarized; above 1 it holds a loop (or steps not told apart).
    steps: the trace's steps (`tfplace.trace.steps`); empty when it is
      one step (no step markers, no repeated op runs).
    step: the index of the step summarized (None: the whole trace).
    steps_found_by: how the steps were found, in words ("" for one step).
    skipped_files: the profile run's files the trace was read without
      (`Trace.skipped_files`: path and why); what they held is missing.
  """
  source: str
  n_events: int
  span_s: float
  devices: Tuple[DeviceUsage, ...]
  transfers: Tuple[TransferStats, ...]
  top_ops: Tuple[OpTime, ...]
  critical_path: Tuple[PathStep, ...]
  critical_path_busy_s: float
  critical_path_segments: Tuple[PathSegment, ...] = ()
  top_k: int = 10
  max_op_runs: int = 1
  steps: Tuple[steps_lib.TraceStep, ...] = ()
  step: Optional[int] = None
  steps_found_by: str = ""
  skipped_files: Tuple[SkippedFile, ...] = ()

  def to_dict(self) -> dict:
    """A JSON-ready dict (for `--json`)."""
    return dataclasses.asdict(self)

  def __str__(self) -> str:
    return format_summary(self)


def merge_intervals(intervals: Sequence[Tuple[float, float]]) -> List[Tuple[float, float]]:
  """Sorted, disjoint union of [start, end) intervals (touching ones merge)."""
  merged: List[Tuple[float, float]] = []
  for start, end in sorted(intervals):
    if merged and start <= merged[-1][1] + _EPS:
      merged[-1] = (merged[-1][0], max(merged[-1][1], end))
    else:
      merged.append((start, end))
  return merged


def device_usage(trace: Trace, device: str) -> DeviceUsage:
  """Busy time (union of op intervals) and idle gaps of `device`."""
  ops = [e for e in trace.events_on(device) if e.kind == OP]
  merged = merge_intervals([(e.start_s, e.end_s) for e in ops])
  busy = sum(end - start for start, end in merged)
  gaps = [b[0] - a[1] for a, b in zip(merged, merged[1:])]
  span = trace.span_s()
  return DeviceUsage(
      device=device, n_ops=len(ops), busy_s=busy,
      busy_pct=100.0 * busy / span if span > 0 else 0.0,
      idle_gaps=len(gaps), idle_gap_s=sum(gaps),
      largest_gap_s=max(gaps, default=0.0))


def transfer_stats(trace: Trace) -> Tuple[TransferStats, ...]:
  """Count, bytes and time of transfers per (src, dst) device pair."""
  acc: Dict[Tuple[str, str], List[float]] = collections.defaultdict(lambda: [0, 0, 0.0])
  for e in trace.transfers():
    row = acc[(e.src_device or "?", e.dst_device or "?")]
    row[0] += 1
    row[1] += e.nbytes
    row[2] += e.duration_s
  return tuple(TransferStats(src, dst, int(c), int(b), t)
               for (src, dst), (c, b, t) in sorted(acc.items()))


def top_ops(trace: Trace, k: int = 10) -> Tuple[OpTime, ...]:
  """The `k` ops with the most total time (per op name and device)."""
  acc: Dict[Tuple[str, str], List] = {}
  for e in trace.ops():
    row = acc.setdefault((e.name, e.device), [e.op_type, 0, 0.0])
    row[1] += 1
    row[2] += e.duration_s
  rows = [OpTime(name, op_type, device, count, total)
          for (name, device), (op_type, count, total) in acc.items()]
  rows.sort(key=lambda r: (-r.total_s, r.name, r.device))
  return tuple(rows[:max(k, 0)])


def max_op_runs(trace: Trace) -> int:
  """The most times one op (by name) ran on one device (0: no ops)."""
  runs = collections.Counter((e.name, e.device) for e in trace.ops())
  return max(runs.values(), default=0)


def _arrival_index(trace: Trace) -> Dict[str, Tuple[List[float], List[int]]]:
  """Per device: event indices (sorted by end time) whose result is there."""
  by_device: Dict[str, List[Tuple[float, int]]] = collections.defaultdict(list)
  for i, e in enumerate(trace.events):
    where = (e.dst_device or e.device) if e.kind == TRANSFER else e.device
    by_device[where].append((e.end_s, i))
    if e.kind == TRANSFER and where != e.device:
      by_device[e.device].append((e.end_s, i))
  index = {}
  for device, rows in by_device.items():
    rows.sort()
    index[device] = ([r[0] for r in rows], [r[1] for r in rows])
  return index


def _predecessor(trace: Trace, index, i: int, seen: set) -> Optional[int]:
  """The latest-ending event that ended by event i's start and could feed it."""
  e = trace.events[i]
  places = [e.device]
  if e.kind == TRANSFER and e.src_device:
    places.append(e.src_device)
  best = None
  for place in places:
    ends, ids = index.get(place, ([], []))
    pos = bisect.bisect_right(ends, e.start_s + _EPS) - 1
    while pos >= 0 and (ids[pos] in seen or ids[pos] == i):
      pos -= 1
    if pos >= 0 and (best is None or ends[pos] > trace.events[best].end_s):
      best = ids[pos]
  return best


def critical_path(trace: Trace) -> Tuple[PathStep, ...]:
  """The approximate critical path (see the module docstring), in time order."""
  if not trace.events:
    return ()
  index = _arrival_index(trace)
  i = max(range(len(trace.events)), key=lambda j: (trace.events[j].end_s, -j))
  chain, seen = [], set()
  while i is not None:
    seen.add(i)
    chain.append(trace.events[i])
    i = _predecessor(trace, index, i, seen)
  return tuple(PathStep(e.name, e.op_type, e.device, e.kind, e.start_s,
                        e.duration_s, e.src_device, e.dst_device)
               for e in reversed(chain))


def path_segments(path: Sequence[PathStep]) -> Tuple[PathSegment, ...]:
  """The critical path as runs of consecutive events on one device (trivial
  ops such as Const and Identity are counted, not named)."""
  from tfplace.cost.analytical import TRIVIAL_OP_TYPES
  runs: List[List[PathStep]] = []
  for step in path:
    key = (step.device, step.kind, step.src_device, step.dst_device)
    if runs and (runs[-1][-1].device, runs[-1][-1].kind,
                 runs[-1][-1].src_device, runs[-1][-1].dst_device) == key:
      runs[-1].append(step)
    else:
      runs.append([step])
  out = []
  for run in runs:
    real = [s for s in run if s.kind == TRANSFER
            or s.op_type not in TRIVIAL_OP_TYPES]
    longest = max(real, key=lambda s: s.duration_s, default=None)
    out.append(PathSegment(
        device=run[0].device, kind=run[0].kind, start_s=run[0].start_s,
        end_s=max(s.start_s + s.duration_s for s in run),
        busy_s=sum(s.duration_s for s in run), n_events=len(run),
        n_trivial=len(run) - len(real),
        longest=longest.name if longest else "",
        longest_type=longest.op_type if longest else "",
        longest_s=longest.duration_s if longest else 0.0,
        src_device=run[0].src_device, dst_device=run[0].dst_device))
  return tuple(out)


def summarize(trace: Trace, top_k: int = 10,
              step: Union[int, str] = steps_lib.MEDIAN) -> TraceSummary:
  """Summarizes `trace`, or one of its steps (see the module docstring for
  definitions).

  Args:
    trace: the trace.
    top_k: how many ops to list by total time, and how many rows every
      list shows when the summary is printed.
    step: when the trace holds several steps (`tfplace.trace.steps`), the
      one to summarize: its index, "median" (the median step by step
      time) or "all" (the whole trace, every step together).

  Raises:
    TraceError: `step` names no step of the trace.
  """
  split = steps_lib.split_steps(trace)
  index = steps_lib.pick_step(split, step)
  if split.found_by == steps_lib.ONE_STEP:
    return _summarize(trace, top_k)
  part = trace if index is None else split.traces[index]
  return dataclasses.replace(
      _summarize(part, top_k), steps=split.steps, step=index,
      steps_found_by=split.describe())


def _summarize(trace: Trace, top_k: int) -> TraceSummary:
  path = critical_path(trace)
  return TraceSummary(
      skipped_files=trace.skipped_files,
      source=trace.source, n_events=len(trace.events), span_s=trace.span_s(),
      devices=tuple(device_usage(trace, d) for d in trace.devices()),
      transfers=transfer_stats(trace), top_ops=top_ops(trace, top_k),
      critical_path=path,
      critical_path_busy_s=sum(s.duration_s for s in path),
      critical_path_segments=path_segments(path), top_k=max(top_k, 0),
      max_op_runs=max_op_runs(trace))


def format_summary(summary: TraceSummary, top: Optional[int] = None) -> str:
  """A readable text report of `summary`; see `tfplace.trace.report`.

  Args:
    summary: the summary.
    top: rows per list (default: the summary's `top_k`).
  """
  from tfplace.trace import report
  return report.format_summary(summary, top)
