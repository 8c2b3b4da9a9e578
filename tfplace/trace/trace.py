"""The trace data model: timed op and transfer events on devices.

Every reader (`tfplace.trace.reader`) turns a profiler output into a `Trace`;
summaries, exports, plots and comparisons only ever see this model. Times are
in seconds relative to the first event of the trace.
"""

import dataclasses
from typing import Dict, Iterable, List, Optional, Tuple

from tfplace.errors import TraceError

OP = "op"
TRANSFER = "transfer"
KINDS = (OP, TRANSFER)
# The end of a transfer that is the session's client (a fetched or fed
# tensor), not a device.
CLIENT = "client"

# Op types that move tensors between devices rather than compute.
_TRANSFER_PREFIXES = ("_Send", "_Recv", "_HostSend", "_HostRecv", "RecvTensor",
                      "MEMCPY", "Memcpy", "_Memcpy")


def is_transfer_op(op_type: str) -> bool:
  """True for op types that move a tensor between devices.

  Args:
    op_type: a TF op type ("_Send", "_Recv", "RecvTensor", "MEMCPYHtoD", ...).
  """
  return op_type.startswith(_TRANSFER_PREFIXES)


@dataclasses.dataclass(frozen=True)
class TraceEvent:
  """One timed event on one device.

  Attributes:
    device: the device (or timeline) the event ran on.
    name: the op name ("dense/MatMul"); for transfers, a tensor or edge name.
    op_type: the TF op type ("MatMul", "_Send", "RecvTensor", ...).
    start_s: start time in seconds from the start of the trace.
    duration_s: duration in seconds (>= 0).
    kind: "op" (compute) or "transfer" (a tensor moving between devices).
    nbytes: bytes moved (transfers) or produced (ops) where known, else 0.
    src_device: for transfers, the sending device where known.
    dst_device: for transfers, the receiving device where known.
  """
  device: str
  name: str
  op_type: str
  start_s: float
  duration_s: float
  kind: str = OP
  nbytes: int = 0
  src_device: Optional[str] = None
  dst_device: Optional[str] = None

  def __post_init__(self):
    if self.kind not in KINDS:
      raise TraceError(f"event {self.name!r}: kind must be one of {KINDS}, "
                       f"got {self.kind!r}")
    if not self.duration_s >= 0:
      raise TraceError(f"event {self.name!r}: negative or NaN duration "
                       f"{self.duration_s}")

  @property
  def end_s(self) -> float:
    """End time in seconds."""
    return self.start_s + self.duration_s


@dataclasses.dataclass(frozen=True)
class StepMark:
  """A step the profiled program marked: a TraceMe event with a step number.

  Keras `fit` records one per batch ("train", `step_num`); a custom loop
  records them with `tf.profiler.experimental.Trace("train", step_num=i,
  _r=1)`. `tfplace.trace.steps` splits a trace's events by them.

  Attributes:
    name: the marker's name ("train").
    step_num: the step number it recorded.
    start_s: its start, on the trace's clock (before the first event: < 0).
    end_s: its end.
  """
  name: str
  step_num: int
  start_s: float
  end_s: float


@dataclasses.dataclass(frozen=True)
class SkippedFile:
  """A file of a profile run that the trace was read without: a worker's
  `.xplane.pb` that is empty or unreadable (`xplane.readable_spaces`).

  Attributes:
    path: the file.
    why: why it was not read ("the file is empty", "not a readable TF
      profiler xplane (...)").
  """
  path: str
  why: str


@dataclasses.dataclass(frozen=True, repr=False)
class Trace:
  """A set of events, sorted by start time, from one profile.

  Attributes:
    events: the events, sorted by (start_s, device, name).
    source: where the trace came from (a path or a description).
    step_marks: the step markers the profile holds, by start (none for
      step stats and most Chrome traces).
    skipped_files: the run's files it was read without (a worker's
      unreadable profile), with why; its events miss those workers.
  """
  events: Tuple[TraceEvent, ...]
  source: str = ""
  step_marks: Tuple[StepMark, ...] = ()
  skipped_files: Tuple[SkippedFile, ...] = ()

  def __repr__(self) -> str:
    # Not every event: a trace has thousands (tfplace.summarize reads it).
    marks = (f", {len(self.step_marks)} step markers" if self.step_marks
             else "")
    skipped = (f", {len(self.skipped_files)} unreadable file(s) skipped"
               if self.skipped_files else "")
    return (f"Trace({len(self.events)} events on {len(self.devices())} "
            f"device(s), span {self.span_s() * 1e3:.3f} ms{marks}{skipped}, "
            f"source={self.source!r})")

  def devices(self) -> Tuple[str, ...]:
    """Sorted names of the devices that have events."""
    return tuple(sorted({e.device for e in self.events}))

  def span_s(self) -> float:
    """Seconds from the first event's start to the last event's end."""
    if not self.events:
      return 0.0
    return (max(e.end_s for e in self.events) -
            min(e.start_s for e in self.events))

  def events_on(self, device: str) -> Tuple[TraceEvent, ...]:
    """The events on `device`, in start order."""
    return tuple(e for e in self.events if e.device == device)

  def ops(self) -> Tuple[TraceEvent, ...]:
    """The compute ("op") events."""
    return tuple(e for e in self.events if e.kind == OP)

  def transfers(self) -> Tuple[TraceEvent, ...]:
    """The "transfer" events."""
    return tuple(e for e in self.events if e.kind == TRANSFER)

  def steps(self):
    """This trace split into its steps: a `tfplace.trace.steps.StepSplit`
    (`.steps`: index, step number, start, step time of each)."""
    from tfplace.trace.steps import split_steps
    return split_steps(self)

  def step(self, step="median") -> "Trace":
    """The events of one step as a trace: `step` is its index (0 = first),
    "median" (the median step by step time) or "all" (this trace).

    Raises:
      TraceError: the trace has no such step.
    """
    from tfplace.trace.steps import select
    return select(self, step)


def make_trace(events: Iterable[TraceEvent], source: str,
               step_marks: Iterable[StepMark] = (),
               skipped_files: Iterable[SkippedFile] = ()) -> Trace:
  """Builds a `Trace` from events: shifted to start at 0 and sorted.

  Args:
    events: events with start times on any common clock.
    source: where they came from (used in messages).
    step_marks: step markers on the same clock (shifted with the events).
    skipped_files: files of the run it was read without.

  Returns:
    The trace, whose first event starts at 0.0.

  Raises:
    TraceError: if there are no events.
  """
  events = list(events)
  if not events:
    raise TraceError(f"{source}: the trace has no op or transfer events")
  t0 = min(e.start_s for e in events)
  shifted = [dataclasses.replace(e, start_s=e.start_s - t0) for e in events]
  shifted.sort(key=lambda e: (e.start_s, e.device, e.name))
  marks = sorted((dataclasses.replace(m, start_s=m.start_s - t0,
                                      end_s=m.end_s - t0) for m in step_marks),
                 key=lambda m: (m.start_s, m.step_num))
  return Trace(events=tuple(shifted), source=source, step_marks=tuple(marks),
               skipped_files=tuple(skipped_files))


def _name_parts(device: str) -> Tuple[List[str], int]:
  """(components, index of the first component after job/replica/task)."""
  parts = [p for p in device.split("/") if p]
  tail = len(parts)
  for i, p in enumerate(parts):
    if p.startswith(("job:", "replica:", "task:")):
      tail = i + 1
  return parts, min(tail, max(len(parts) - 1, 0))


def _short(device: str, level: int) -> str:
  parts, tail = _name_parts(device)
  if not parts:
    return device
  end = [p.replace("device:", "") for p in parts[tail:]]
  task = [p for p in parts[:tail] if p.startswith("task:")]
  job = [p[len("job:"):] for p in parts[:tail] if p.startswith("job:")]
  host = [p for p in parts[:tail] if not p.startswith(("job:", "replica:",
                                                        "task:"))]
  if level == 0:
    pieces = end
  elif level == 1:
    pieces = (task or host) + end
  elif level == 2:
    pieces = job + (task or host) + end
  else:
    return device
  return "/".join(pieces) or device


def short_device_names(devices: Iterable[str]) -> Dict[str, str]:
  """Short names that stay distinct, for tables and chart rows.

  The shortest of "CPU:0", "task:0/CPU:0", "worker/task:0/CPU:0" and the
  full name under which no two of `devices` look alike (the same level for
  all): a worker's CPU and the client's ("/job:localhost/.../CPU:0") keep
  their job.

  Args:
    devices: full device names ("?" and other free-form names are kept).
  """
  names = sorted(set(devices))
  for level in range(4):
    short = {d: _short(d, level) for d in names}
    if len(set(short.values())) == len(names):
      return short
  return {d: d for d in names}
