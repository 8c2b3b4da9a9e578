"""A trace of several steps (a Keras `fit` under `tf.profiler`) is not read
as one step: its whole-trace report says it holds several steps (see
trace_step_split_test for the split), a loop in one step keeps a note, the
Gantt title of the whole trace gives a span, not a step time; and the
chart's legend is not clipped."""

import pytest

from tfplace.trace.plot import gantt_layout
from tfplace.trace.summary import summarize
from tfplace.trace.trace import TraceEvent, make_trace

HOST = "/host:CPU"


def _three_steps():
  events = []
  for step in range(3):
    t0 = step * 0.010
    events += [TraceEvent(HOST, "dense/MatMul", "MatMul", t0, 0.002),
               TraceEvent(HOST, "dense/Relu", "Relu", t0 + 0.002, 0.001)]
  return make_trace(events, "fit")


def test_report_of_the_whole_trace_says_it_holds_several_steps():
  summary = summarize(_three_steps(), step="all")
  assert summary.max_op_runs == 3
  text = str(summary)
  assert "6 events on 1 device, span 23.000 ms\n" in text
  assert "the whole trace: 3 steps (step times 3.000-3.000 ms" in text
  assert "every figure below is over all of them" in text
  assert "host:CPU = /host:CPU" not in text  # no line to drop a slash


def test_a_loop_in_one_step_keeps_the_note():
  # Most ops ran once, one ran 3 times: a loop, not 3 steps.
  events = [TraceEvent(HOST, f"op{k}", "MatMul", k * 1e-3, 1e-3)
            for k in range(3)]
  events += [TraceEvent(HOST, "body/Add", "AddV2", 0.01 + k * 1e-3, 1e-3)
             for k in range(3)]
  summary = summarize(make_trace(events, "loop"))
  assert summary.steps == () and summary.max_op_runs == 3
  assert "ops ran up to 3 times, but not most of them" in str(summary)


def test_one_step_has_no_note():
  one = make_trace([TraceEvent(HOST, "a", "MatMul", 0.0, 0.001)], "one")
  assert summarize(one).max_op_runs == 1
  assert "several steps" not in str(summarize(one))


def test_gantt_title_is_a_span_not_a_step_time():
  title = gantt_layout(_three_steps()).title
  assert "step time" not in title
  assert title == ("span 23.000 ms (ops ran up to 3 times: several steps) "
                   "on 1 device (host:CPU)")


def test_legend_of_a_one_device_chart_is_not_clipped(tmp_path, monkeypatch):
  # One device row and a dozen op types: the legend ran off the bottom of
  # the figure (its height came from the rows alone).
  pytest.importorskip("matplotlib")
  from matplotlib.figure import Figure
  from tfplace.trace.plot import gantt
  inside = []
  save = Figure.savefig

  def checked_savefig(fig, *args, **kwargs):
    fig.canvas.draw()
    box = fig.axes[0].get_legend().get_window_extent()
    inside.append(box.y0 >= 0 and box.y1 <= fig.bbox.height)
    return save(fig, *args, **kwargs)

  monkeypatch.setattr(Figure, "savefig", checked_savefig)
  events = [TraceEvent(HOST, f"op{k}", f"Type{k}", k * 1e-3, 1e-3)
            for k in range(12)]
  gantt(make_trace(events, "hand"), str(tmp_path / "g.png"))
  assert inside == [True]
