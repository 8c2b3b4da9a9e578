"""Inspect, export, plot or compare a profiler trace.

usage: tfplace trace PATH [--json] [--top 10] [--step median|all|N] [--steps]
                          [--perfetto OUT.json]
                          [--gantt OUT.png [--placement p.json]]
                          [--compare OTHER_PATH] [--threads]

PATH is a TF profiler log directory (or .xplane.pb), a Chrome-trace JSON
(.json/.json.gz) or a saved StepStats/RunMetadata (.pb/.pbtxt). Prints a
one-page summary: per-device busy time and idle gaps, transfers, top ops, and
the critical path by device and its longest segments (--top rows per list;
--json the same lists, as JSON); with --compare, also how OTHER_PATH
differs from PATH; with --threads (a TF profiler log directory or
.xplane.pb), where each worker's host threads spent the step: ops, sends,
Recv issues and completions, executor (`tfplace.trace.host_activity`).

A trace of several steps (a Keras fit under the profiler, a tf.function
called in a loop) is split into its steps: by the profiler's step markers
(Keras's "train" per batch; `tf.profiler.experimental.Trace("train",
step_num=i, _r=1)` around each step of a custom loop), else by each op's
k-th run (`tfplace.trace.steps`). The report then covers the median step
by step time, and says which; --step N picks another (its index, 0 = the
first; --steps lists them with their times), --step all the whole trace.
--gantt and --compare (OTHER_PATH's step of the same choice) follow --step;
--perfetto and --threads cover the whole profile.

Bad input exits with status 2 and writes nothing (an output is never
written over an input, and --perfetto replaces only a trace tfplace
exported before).
"""

import json

from absl import flags

from tfplace.errors import TraceError
from tfplace.io_utils import check_out_path

_JSON = flags.DEFINE_bool("json", False, "print the results as JSON")
_TOP = flags.DEFINE_integer("top", 10, "rows per list (devices, transfers, "
                            "ops, critical-path segments); 0: none, each "
                            "list only counted", lower_bound=0)
_STEP = flags.DEFINE_string(
    "step", "median", "of a trace of several steps, the one to report: its "
    "index (0 = the first; see --steps), 'median' (the median step by step "
    "time) or 'all' (the whole trace)")
_STEPS = flags.DEFINE_bool(
    "steps", False, "also list the trace's steps: index, the profiler's "
    "step number, start, step time, events")
_PERFETTO = flags.DEFINE_string(
    "perfetto", None, "also write the trace as Chrome-trace/Perfetto JSON "
    "(.json or .json.gz)")
_GANTT = flags.DEFINE_string("gantt", None, "also draw a Gantt chart (.png; "
                             "needs matplotlib, the viz extra)")
_COMPARE = flags.DEFINE_string("compare", None, "a second trace to compare "
                               "PATH with (PATH is 'before')")
_THREADS = flags.DEFINE_bool(
    "threads", False, "also print each worker's host threads: self time in "
    "ops, sends, Recv issues and completions, executor (profiler xplanes "
    "only)")
_PLACEMENT = flags.DEFINE_string(
    "placement", None, "the placement JSON that ran, to title the Gantt "
    "chart with its placer and devices")


def main(argv):
  """Runs `tfplace trace`."""
  from tfplace.trace import compare as compare_lib  # pylint: disable=import-outside-toplevel
  # pylint: disable-next=import-outside-toplevel
  from tfplace.trace import (export, host_activity, plot, reader, steps,
                             summary)
  if len(argv) != 2:
    raise TraceError("expected exactly one trace PATH "
                     f"(got {len(argv) - 1}; see tfplace trace --help)")
  if _PLACEMENT.value and not _GANTT.value:
    raise TraceError("--placement only titles the Gantt chart: add "
                     "--gantt OUT.png, or leave --placement out")
  inputs = [argv[1], _COMPARE.value, _PLACEMENT.value]
  if _PERFETTO.value:
    export.check_perfetto_path(_PERFETTO.value)
    check_out_path(_PERFETTO.value, "--perfetto", inputs=inputs)
    export.check_replaceable(_PERFETTO.value)
  if _GANTT.value:
    plot.check_gantt_path(_GANTT.value)
    check_out_path(_GANTT.value, "--gantt", inputs=inputs)
  placement = None
  if _PLACEMENT.value:
    from tfplace.placement import Placement  # pylint: disable=import-outside-toplevel
    placement = Placement.load(_PLACEMENT.value)
  trace = reader.load_trace(argv[1])  # its errors say most about PATH
  split = steps.split_steps(trace)
  shown = steps.select(trace, _STEP.value)  # a bad --step: before any output
  threads = None
  if _THREADS.value:
    threads = host_activity.host_activity(reader.xplane_files(argv[1]),
                                          warn=False)  # load_trace warned.
  if placement is not None and _GANTT.value:
    plot.check_placement_matches(shown, placement)
  other = (steps.select(reader.load_trace(_COMPARE.value), _STEP.value)
           if _COMPARE.value else None)
  result = summary.summarize(trace, top_k=_TOP.value, step=_STEP.value)
  comparison = compare_lib.compare(shown, other) if other is not None else None
  if _PERFETTO.value:
    export.write_perfetto(trace, _PERFETTO.value)
  if _GANTT.value:
    plot.gantt(shown, _GANTT.value, placement=placement)
  if _JSON.value:
    print(json.dumps({"summary": result.to_dict(),
                      "comparison": comparison.to_dict() if comparison else None,
                      "host_threads": threads.to_dict() if threads else None},
                     indent=2))
    return 0
  if _STEPS.value:
    print(steps.format_steps(split))
  print(summary.format_summary(result), end="")
  if threads is not None:
    print("\n" + host_activity.format_host_activity(threads), end="")
  if comparison is not None:
    print(f"\ncompared with {_COMPARE.value}:")
    print(compare_lib.format_comparison(comparison, max_moved=_TOP.value),
          end="")
  for what, path in (("perfetto trace", _PERFETTO.value), ("gantt chart", _GANTT.value)):
    if path:
      print(f"wrote {what}: {path}")
  return 0
