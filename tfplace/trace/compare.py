"""Comparing two traces of the same model, e.g. before and after a placement."""

import dataclasses
import math
from typing import Dict, Tuple

from tfplace.trace.summary import device_usage
from tfplace.trace.trace import SkippedFile, Trace, short_device_names
from tfplace.units import format_bytes


@dataclasses.dataclass(frozen=True)
class DeviceDelta:
  """Busy time (union of op intervals) of one device in both traces."""
  device: str
  busy_before_s: float
  busy_after_s: float


@dataclasses.dataclass(frozen=True)
class TransferTotals:
  """All transfers of one trace."""
  count: int
  nbytes: int
  time_s: float


@dataclasses.dataclass(frozen=True)
class MovedOp:
  """An op that ran on a different device in the second trace."""
  name: str
  device_before: str
  device_after: str


@dataclasses.dataclass(frozen=True)
class TraceComparison:
  """Before/after numbers of two traces.

  Attributes:
    span_before_s: span of the first trace.
    span_after_s: span of the second trace.
    span_ratio: span_after_s / span_before_s (< 1 means the second is faster;
      inf if the first has zero span).
    devices: per device present in either trace, sorted.
    transfers_before: transfer totals of the first trace.
    transfers_after: transfer totals of the second trace.
    moved_ops: ops (by name, in both traces) whose device changed, by name.
    ops_before: distinct op names in the first trace.
    ops_after: distinct op names in the second trace.
    shared_ops: op names in both (few: the traces are of different models).
    skipped_before: files of the first trace's run it was read without
      (`Trace.skipped_files`: a worker's unreadable profile).
    skipped_after: the same for the second trace.
  """
  span_before_s: float
  span_after_s: float
  span_ratio: float
  devices: Tuple[DeviceDelta, ...]
  transfers_before: TransferTotals
  transfers_after: TransferTotals
  moved_ops: Tuple[MovedOp, ...]
  ops_before: int = 0
  ops_after: int = 0
  shared_ops: int = 0
  skipped_before: Tuple[SkippedFile, ...] = ()
  skipped_after: Tuple[SkippedFile, ...] = ()

  def to_dict(self) -> dict:
    """A JSON-ready dict (for `--json`); an infinite ratio becomes None."""
    d = dataclasses.asdict(self)
    if not math.isfinite(d["span_ratio"]):
      d["span_ratio"] = None
    return d


def _transfer_totals(trace: Trace) -> TransferTotals:
  ts = trace.transfers()
  return TransferTotals(len(ts), sum(e.nbytes for e in ts),
                        sum(e.duration_s for e in ts))


def _op_devices(trace: Trace) -> Dict[str, str]:
  """Op name -> the device of its first event."""
  where: Dict[str, str] = {}
  for e in trace.ops():
    where.setdefault(e.name, e.device)
  return where


def compare(before: Trace, after: Trace) -> TraceComparison:
  """Compares two traces.

  Args:
    before: the reference trace.
    after: the trace to compare with it.
  """
  devices = sorted(set(before.devices()) | set(after.devices()))
  deltas = tuple(DeviceDelta(d, device_usage(before, d).busy_s,
                             device_usage(after, d).busy_s) for d in devices)
  old, new = _op_devices(before), _op_devices(after)
  moved = tuple(MovedOp(n, old[n], new[n]) for n in sorted(old)
                if n in new and old[n] != new[n])
  span_before, span_after = before.span_s(), after.span_s()
  ratio = span_after / span_before if span_before > 0 else float("inf")
  return TraceComparison(span_before, span_after, ratio, deltas,
                         _transfer_totals(before), _transfer_totals(after),
                         moved, len(old), len(new), len(set(old) & set(new)),
                         before.skipped_files, after.skipped_files)


def _ms(seconds: float) -> str:
  return f"{seconds * 1e3:.3f}"


def _transfer_text(t: TransferTotals) -> str:
  if not t.count:
    return "0"
  size = format_bytes(t.nbytes) if t.nbytes else "? bytes"
  return f"{t.count} ({size}, {_ms(t.time_s)} ms summed)"


def _shared_text(c: TraceComparison) -> str:
  """How many op names the traces share; a warning when it is few."""
  text = (f"ops in both traces: {c.shared_ops} of {c.ops_before} (before) "
          f"and {c.ops_after} (after)")
  if c.shared_ops * 2 < min(c.ops_before, c.ops_after):
    text += (" -- fewer than half: are these traces of the same model? "
             "(the numbers below compare whatever ran)")
  return text


def format_comparison(c: TraceComparison, max_moved: int = 20) -> str:
  """A readable text report of `c` (times in milliseconds).

  Args:
    c: the comparison.
    max_moved: how many moved ops to list (`tfplace trace --top`).
  """
  names = short_device_names(
      [d.device for d in c.devices] +
      [d for m in c.moved_ops for d in (m.device_before, m.device_after)])
  lines = [f"{side} trace read without {len(files)} unreadable file(s) "
           "of its run: " + "; ".join(f"{f.path}: {f.why}" for f in files)
           for side, files in (("first", c.skipped_before),
                               ("second", c.skipped_after)) if files]
  lines += [_shared_text(c),
           f"span: {_ms(c.span_before_s)} ms -> {_ms(c.span_after_s)} ms "
           f"(x{c.span_ratio:.3f})", "", "busy ms per device (before -> after):"]
  width = max((len(names[d.device]) for d in c.devices), default=0)
  lines += [f"  {names[d.device]:<{width}}  {_ms(d.busy_before_s):>10} -> "
            f"{_ms(d.busy_after_s):>10}" for d in c.devices]
  lines += ["", f"transfers: {_transfer_text(c.transfers_before)} -> "
            f"{_transfer_text(c.transfers_after)}", "",
            f"ops on another device: {len(c.moved_ops)}"]
  shown = c.moved_ops[:max(max_moved, 0)]
  lines += [f"  {m.name}: {names[m.device_before]} -> {names[m.device_after]}"
            for m in shown]
  if len(c.moved_ops) > len(shown):
    lines.append(f"  ... and {len(c.moved_ops) - len(shown)} more")
  return "\n".join(lines) + "\n"
