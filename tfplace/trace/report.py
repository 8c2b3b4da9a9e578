"""The text report of a trace summary: one page a person reads.

Every list (devices, transfers, top ops, critical-path segments) shows at
most `top` rows, the largest first, and says how many it left out. Devices
get the shortest names that stay distinct ("task:0/CPU:0"), listed once in
full. The critical path is summarized: its busy time per device and its
longest segments (runs of events on one device, trivial ops counted, not
named), not event by event (`--json` has every event).
"""

import os
from typing import Dict, List, Optional, Sequence, Tuple

from tfplace.units import format_bytes
from tfplace.trace.steps import median_step
from tfplace.trace.summary import TraceSummary
from tfplace.trace.trace import TRANSFER, short_device_names


def _ms(seconds: float) -> str:
  return f"{seconds * 1e3:.3f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[object]],
           indent: str = "  ") -> List[str]:
  """Columns padded to width: text left-aligned, numbers right-aligned; no
  rows, no header (`top` 0 lists nothing)."""
  if not rows:
    return []
  cells = [[str(c) for c in row] for row in rows]
  widths = [max(len(c) for c in col) for col in zip(header, *cells)]
  numeric = [all(_is_number(r[i]) for r in cells) and bool(cells)
             for i in range(len(header))]

  def fmt(row):
    return indent + "  ".join(
        c.rjust(w) if num else c.ljust(w)
        for c, w, num in zip(row, widths, numeric)).rstrip()

  return [fmt(header)] + [fmt(r) for r in cells]


def _is_number(text: str) -> bool:
  try:
    float(text.rstrip("%"))
    return True
  except ValueError:
    return False


def _more(shown: int, total: int, what: str) -> List[str]:
  """"  ... 3 more devices" when rows were left out (`what` is plural);
  "  3 devices, not listed (top 0)" when none is shown."""
  left = total - shown
  if left <= 0:
    return []
  noun = what if left > 1 else what[:-1]
  if not shown:
    return [f"  {left} {noun}, not listed (top 0)"]
  return [f"  ... {left} more {noun}"]


def format_summary(summary: TraceSummary, top: Optional[int] = None) -> str:
  """The report (times in milliseconds).

  Args:
    summary: the summary.
    top: rows per list (default: the summary's `top_k`).
  """
  top = summary.top_k if top is None else max(top, 0)
  devices = [d.device for d in summary.devices]
  for t in summary.transfers:
    devices += [t.src_device, t.dst_device]
  for g in summary.critical_path_segments:
    devices += [d for d in (g.src_device, g.dst_device) if d]
  names = short_device_names(devices)
  n_devices = len(summary.devices)
  lines = [f"trace: {summary.source}",
           f"{summary.n_events} events on {n_devices} "
           f"device{'' if n_devices == 1 else 's'}, span {_ms(summary.span_s)} ms"]
  lines += _skipped(summary)
  lines += _steps(summary)
  renamed = [f"{names[d]} = {d}" for d in sorted(set(devices))
             if names[d] not in (d, d.lstrip("/"))]
  if renamed:
    lines.append("devices: " + "; ".join(renamed))
  for part in (_devices, _transfers, _top_ops, _critical_path):
    lines += [""] + part(summary, names, top)
  return "\n".join(lines) + "\n"


def _skipped(summary: TraceSummary) -> List[str]:
  """One line naming the run's files the trace was read without, and why
  (none when every file was read)."""
  files = summary.skipped_files
  if not files:
    return []
  n = len(files)
  return [f"skipped {n} unreadable file{'' if n == 1 else 's'} of the run "
          f"(what {'it' if n == 1 else 'they'} held is missing below): "
          + "; ".join(f"{_under(f.path, summary.source)}: {f.why}"
                      for f in files)]


def _under(path: str, source: str) -> str:
  """`path` relative to the trace's `source` folder when it lies in it."""
  if source and os.path.isdir(source):
    relative = os.path.relpath(path, source)
    if not relative.startswith(".."):
      return relative
  return path


def _steps(summary: TraceSummary) -> List[str]:
  """What was summarized: one step of several (and which), the whole trace
  of several steps, or one step whose ops repeat (a loop)."""
  runs = summary.max_op_runs
  if not summary.steps:
    if runs <= 1:
      return []
    return [f"note: ops ran up to {runs} times, but not most of them the "
            "same number of times: a loop in one step, or steps not told "
            "apart (no step markers); every figure below is over the whole "
            "trace"]
  times = [s.step_time_s for s in summary.steps if s.n_events]
  n = len(summary.steps)
  spread = (f"step time {_ms(times[0])} ms" if len(times) == 1 else
            f"step times {_ms(min(times))}-{_ms(max(times))} ms, median "
            f"{_ms(median_step(summary.steps).step_time_s)} ms")
  found = f"found by {summary.steps_found_by}"
  if summary.step is None:
    return [f"the whole trace: {n} step{'' if n == 1 else 's'} ({spread}), "
            f"{found}; every figure "
            "below is over all of them (--steps: each step's time)"]
  step = summary.steps[summary.step]
  if n == 1:
    head = f"the one step: {_ms(step.step_time_s)} ms; {found}"
  else:
    which = " (the median)" if step == median_step(summary.steps) else ""
    head = (f"step {step.index} of {n}{which}: {_ms(step.step_time_s)} ms; "
            f"{spread}; {found}")
  lines = [head,
           "every figure below is this step's (--step N: another, --step "
           "all: the whole trace, --steps: each step's time)"]
  if runs > 1:
    lines.append(f"note: ops ran up to {runs} times in this step (a loop)")
  return lines


def _devices(summary: TraceSummary, names: Dict[str, str],
             top: int) -> List[str]:
  rows = sorted(summary.devices, key=lambda d: -d.busy_s)[:top]
  shown = sorted(rows, key=lambda d: d.device)
  return ["busy time per device (union of its op intervals):"] + _table(
      ["device", "ops", "busy ms", "busy %", "idle gaps", "idle ms",
       "longest gap ms"],
      [[names[d.device], d.n_ops, _ms(d.busy_s), f"{d.busy_pct:.1f}",
        d.idle_gaps, _ms(d.idle_gap_s), _ms(d.largest_gap_s)]
       for d in shown]) + _more(len(rows), len(summary.devices), "devices")


def _transfers(summary: TraceSummary, names: Dict[str, str],
               top: int) -> List[str]:
  if not summary.transfers:
    return ["transfers: none"]
  rows = sorted(summary.transfers, key=lambda t: -t.time_s)[:top]
  lines = ["transfers between devices (summed ms: durations added up, so "
           "overlapping ones can exceed the span):"] + _table(
      ["from -> to", "count", "bytes", "summed ms"],
      [[f"{names[t.src_device]} -> {names[t.dst_device]}", t.count,
        format_bytes(t.nbytes) if t.nbytes else "?", _ms(t.time_s)]
       for t in rows]) + _more(len(rows), len(summary.transfers),
                               "device pairs")
  if any(not t.nbytes for t in rows):
    lines.append("  (bytes ?: the trace does not record them; the step "
                 "stats of `tfplace measure --trace_dir` do)")
  return lines


def _top_ops(summary: TraceSummary, names: Dict[str, str],
             top: int) -> List[str]:
  rows = summary.top_ops[:top]
  if not rows:
    return ["top ops: " + ("not listed (top 0)" if not top else "none")]
  return [f"top {len(rows)} ops by total time:"] + _table(
      ["op", "type", "device", "runs", "total ms"],
      [[o.name, o.op_type, names.get(o.device, o.device), o.count,
        _ms(o.total_s)] for o in rows])


def _critical_path(summary: TraceSummary, names: Dict[str, str],
                   top: int) -> List[str]:
  path = summary.critical_path
  span = summary.span_s
  waiting = 100.0 * (1 - summary.critical_path_busy_s / span) if span else 0.0
  lines = [f"critical path: {len(path)} events, busy "
           f"{_ms(summary.critical_path_busy_s)} ms of {_ms(span)} ms "
           f"({waiting:.0f}% waiting)"]
  if not path:
    return lines
  per: Dict[str, Tuple[int, float]] = {}
  for step in path:
    key = "transfers" if step.kind == TRANSFER else names.get(step.device,
                                                              step.device)
    n, busy = per.get(key, (0, 0.0))
    per[key] = (n + 1, busy + step.duration_s)
  ranked = sorted(per.items(), key=lambda kv: -kv[1][1])
  lines += _table(["on", "events", "busy ms"],
                  [[k, n, _ms(b)] for k, (n, b) in ranked[:top]])
  lines += _more(min(top, len(ranked)), len(ranked), "places")
  segments = summary.critical_path_segments
  shown = sorted(segments, key=lambda g: -g.busy_s)[:top]
  if not shown:
    return lines
  lines += ["", f"longest {len(shown)} of {len(segments)} critical-path "
            "segments (consecutive events on one device):"]
  lines += _table(
      ["start ms", "busy ms", "events", "where", "longest op"],
      [[_ms(g.start_s), _ms(g.busy_s), g.n_events,
        _where(g, names), _longest(g)] for g in shown])
  return lines


def _where(segment, names: Dict[str, str]) -> str:
  if segment.kind != TRANSFER:
    return names.get(segment.device, segment.device)
  ends = [names.get(d, d) if d else "?" for d in (segment.src_device,
                                                 segment.dst_device)]
  return f"transfer {ends[0]} -> {ends[1]}"


def _longest(segment) -> str:
  text = (f"{segment.longest} ({segment.longest_type}, "
          f"{_ms(segment.longest_s)} ms)" if segment.longest else "")
  if segment.n_trivial:
    text += f"{' + ' if text else ''}{segment.n_trivial} trivial"
  return text
