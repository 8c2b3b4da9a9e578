"""The steps of a trace: a profile of several steps split into one per step.

A profile often holds several steps: a Keras `fit` under the profiler, a
`tf.function` called in a loop between `tf.profiler.experimental.start` and
`stop`. The steps are found as the TF profiler finds them:

  * by step markers: TraceMe events with a `step_num` (Keras records
    "train" per batch; a custom loop wraps each step in
    `tf.profiler.experimental.Trace("train", step_num=i, _r=1)`). Markers
    of the most frequent name are used ("train" over "test" when both are
    there); an event belongs to the step whose marker was open when it
    started (an accelerator's event: the last marker that started before
    it, as its kernels can run after the Python side of the step returned);
    events that started outside every marker are in no step (a
    marker is recorded only when the profiler ran for all of it, so a
    Keras profile of batches 3-5 has one whole marker, batch 4's, and
    batches 3 and 5 are outside it);
  * else by op runs: when most op names (on a device) ran the same number of
    times n > 1, the k-th run of each is in step k, and every other event
    (transfers, ops that ran another number of times) in the step whose
    ops had started last when it started. When fewer than half of the op
    names ran n times, the repeats are a loop inside one step, and the
    trace is one step.

A step's time is its marker's duration, or, split by op runs, its events'
first start to last end (the gaps between steps not counted).
"""

import bisect
import collections
import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple, Union

from tfplace.errors import TraceError
from tfplace.trace.trace import OP, StepMark, Trace, make_trace

MARKERS = "markers"
OP_RUNS = "op runs"
ONE_STEP = "one step"
# `summarize(step=...)` / `--step`: the median step, or the whole trace.
MEDIAN = "median"
ALL = "all"


@dataclasses.dataclass(frozen=True)
class TraceStep:
  """One step of a trace.

  Attributes:
    index: its position in the trace (0 = first); what `--step N` picks.
    step_num: the step number its marker recorded (None: split by op runs).
    start_s: its start on the trace's clock.
    step_time_s: its time (see the module docstring).
    n_events: how many events it holds.
  """
  index: int
  step_num: Optional[int]
  start_s: float
  step_time_s: float
  n_events: int


@dataclasses.dataclass(frozen=True)
class StepSplit:
  """A trace split into steps.

  Attributes:
    source: the trace's source.
    found_by: "markers", "op runs" or "one step".
    marker: the markers' name ("train"; "" unless found by markers).
    steps: the steps, in time order.
    traces: each step's events as a trace of its own (starting at 0);
      None for a marker no event started in.
    outside: events in no step (outside every marker).
  """
  source: str
  found_by: str
  marker: str
  steps: Tuple[TraceStep, ...]
  traces: Tuple[Optional[Trace], ...]
  outside: int = 0

  def describe(self) -> str:
    """How the steps were found, in words ("the profiler's 'train' step
    markers")."""
    if self.found_by == MARKERS:
      outside = (f"; {self.outside} events outside them, in no step"
                 if self.outside else "")
      return f"the profiler's {self.marker!r} step markers{outside}"
    if self.found_by == OP_RUNS:
      return ("each op's k-th run (no step markers; mark steps with "
              "tf.profiler.experimental.Trace('train', step_num=i, _r=1))")
    return "one step"

  def median_index(self) -> int:
    """The median step by step time, of those holding events (the lower
    one of two; ties: the earlier)."""
    return median_step(self.steps).index


def median_step(steps: Sequence[TraceStep]) -> TraceStep:
  """The median of `steps` by step time, of those holding events (the lower
  one of two; ties: the earlier)."""
  ranked = sorted((s for s in steps if s.n_events),
                  key=lambda s: (s.step_time_s, s.index))
  return ranked[(len(ranked) - 1) // 2]


def split_steps(trace: Trace) -> StepSplit:
  """Splits `trace` into its steps (see the module docstring)."""
  marks = _step_marks(trace.step_marks)
  if marks:
    return _by_markers(trace, marks)
  groups = _by_op_runs(trace)
  if groups is None:
    step = TraceStep(0, None, 0.0, trace.span_s(), len(trace.events))
    return StepSplit(trace.source, ONE_STEP, "", (step,), (trace,))
  steps, traces = [], []
  for k, group in enumerate(groups):
    start = min(e.start_s for e in group)
    end = max(e.end_s for e in group)
    steps.append(TraceStep(k, None, start, end - start, len(group)))
    traces.append(make_trace(group, _step_source(trace, k),
                             skipped_files=trace.skipped_files))
  return StepSplit(trace.source, OP_RUNS, "", tuple(steps), tuple(traces))


def _step_source(trace: Trace, k: int) -> str:
  return f"{trace.source} (step {k})"


def _step_marks(marks: Sequence[StepMark]) -> List[StepMark]:
  """The markers of the most frequent name, in time order, each starting
  after the one before ended (a nested or overlapping one is dropped)."""
  if not marks:
    return []
  counts = collections.Counter(m.name for m in marks)
  name = max(counts, key=lambda n: (counts[n], -min(
      m.start_s for m in marks if m.name == n)))
  kept: List[StepMark] = []
  for m in sorted((m for m in marks if m.name == name),
                  key=lambda m: m.start_s):
    if not kept or m.start_s >= kept[-1].end_s:
      kept.append(m)
  return kept


def _by_markers(trace: Trace, marks: List[StepMark]) -> StepSplit:
  starts = [m.start_s for m in marks]
  groups: List[list] = [[] for _ in marks]
  outside = 0
  for e in trace.events:
    k = bisect.bisect_right(starts, e.start_s) - 1
    if k < 0 or (e.start_s > marks[k].end_s and _on_host(e.device)):
      outside += 1
    else:
      groups[k].append(e)
  steps, traces = [], []
  for k, (mark, group) in enumerate(zip(marks, groups)):
    steps.append(TraceStep(k, mark.step_num, mark.start_s,
                           mark.end_s - mark.start_s, len(group)))
    traces.append(make_trace(group, _step_source(trace, k),
                             skipped_files=trace.skipped_files)
                  if group else None)
  if all(t is None for t in traces):
    raise TraceError(f"{trace.source}: no event falls in any of its "
                     f"{len(marks)} {marks[0].name!r} step markers")
  return StepSplit(trace.source, MARKERS, marks[0].name, tuple(steps),
                   tuple(traces), outside)


def _on_host(device: str) -> bool:
  """A host's CPU ("/host:CPU", ".../device:CPU:0"), not an accelerator."""
  return "host:CPU" in device or "device:CPU:" in device or "/" not in device


def _by_op_runs(trace: Trace) -> Optional[List[list]]:
  """The events of each step by op runs, or None (one step)."""
  runs = collections.Counter((e.name, e.device) for e in trace.events
                             if e.kind == OP)
  repeated = collections.Counter(c for c in runs.values() if c > 1)
  if not repeated:
    return None
  n = max(repeated, key=lambda c: (repeated[c], -c))
  if 2 * repeated[n] < len(runs):
    return None  # a loop inside one step, not steps
  groups: List[list] = [[] for _ in range(n)]
  seen: Dict[Tuple[str, str], int] = collections.Counter()
  others = []
  for e in trace.events:  # in start order
    key = (e.name, e.device)
    if e.kind == OP and runs[key] == n:
      groups[seen[key]].append(e)
      seen[key] += 1
    else:
      others.append(e)
  starts = [min(e.start_s for e in g) for g in groups]
  for e in others:
    groups[max(bisect.bisect_right(starts, e.start_s) - 1, 0)].append(e)
  return groups


def pick_step(split: StepSplit, step: Union[int, str]) -> Optional[int]:
  """The index of the step `step` names: an index, "median", or "all"
  (None: the whole trace).

  Raises:
    TraceError: no such step, or the step holds no event.
  """
  if step == ALL:
    return None
  if step == MEDIAN:
    return split.median_index()
  if isinstance(step, str):
    try:
      step = int(step)
    except ValueError:
      raise TraceError(f"step {step!r}: give a step's index (0 = first), "
                       f"{MEDIAN!r} or {ALL!r}") from None
  n = len(split.steps)
  if not 0 <= step < n:
    indices = "index 0" if n == 1 else f"indices 0-{n - 1}"
    raise TraceError(f"{split.source}: no step {step}: the trace holds {n} "
                     f"step{'' if n == 1 else 's'} ({indices}; found by "
                     f"{split.describe()})")
  if split.traces[step] is None:
    raise TraceError(f"{split.source}: step {step} holds no event (none "
                     "started while its marker was open)")
  return step


def select(trace: Trace, step: Union[int, str] = MEDIAN) -> Trace:
  """The events of one step of `trace` as a trace (see `pick_step`); the
  trace itself when it is one step or `step` is "all"."""
  split = split_steps(trace)
  index = pick_step(split, step)
  if index is None or split.found_by == ONE_STEP:
    return trace
  return split.traces[index]


def format_steps(split: StepSplit) -> str:
  """The per-step table, under how the steps were found
  (`StepSplit.describe`): index, marker's step number, start (from the
  first step's), step time, events."""
  n = len(split.steps)
  lines = [f"{n} step{'' if n == 1 else 's'}, found by {split.describe()}:"]
  header = ["step", "step_num", "at ms", "step ms", "events"]
  t0 = split.steps[0].start_s
  rows = [[str(s.index), "-" if s.step_num is None else str(s.step_num),
           f"{(s.start_s - t0) * 1e3:.3f}", f"{s.step_time_s * 1e3:.3f}",
           str(s.n_events)] for s in split.steps]
  widths = [max(len(c) for c in col) for col in zip(header, *rows)]
  for row in [header] + rows:
    lines.append("  " + "  ".join(c.rjust(w) for c, w in zip(row, widths)))
  return "\n".join(lines) + "\n"
