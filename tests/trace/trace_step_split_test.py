"""A profile of several steps is split into its steps (`tfplace.trace.steps`):
by the profiler's step markers, else by each op's k-th run. The traces are
made here with the real TF profiler: a small tf.function run 3 times."""

import os
import subprocess
import sys

import pytest

import tfplace  # noqa: F401  (before TF)
from tfplace.errors import TraceError
from tfplace.trace.reader import load_trace
from tfplace.trace.steps import MARKERS, ONE_STEP, OP_RUNS, split_steps
from tfplace.trace.summary import summarize

OPS = {"MatMul", "MatMul/ReadVariableOp", "Relu", "Sum"}


def _profile(logdir, marked):
  """Profiles 3 calls of a tf.function (each in a "train" step marker if
  `marked`); returns the log dir."""
  import tensorflow as tf
  w = tf.Variable(tf.ones([32, 32]))

  @tf.function
  def step(x):
    return tf.reduce_sum(tf.nn.relu(tf.matmul(x, w)))

  x = tf.ones([16, 32])
  step(x)  # traced before the profile
  tf.profiler.experimental.start(str(logdir))
  try:
    for i in range(3):
      if marked:
        with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
          step(x)
      else:
        step(x)
  finally:
    tf.profiler.experimental.stop()
  return str(logdir)


@pytest.fixture(scope="module")
def marked(tmp_path_factory):
  return _profile(tmp_path_factory.mktemp("marked"), marked=True)


@pytest.fixture(scope="module")
def unmarked(tmp_path_factory):
  return _profile(tmp_path_factory.mktemp("unmarked"), marked=False)


def _cli(*args):
  proc = subprocess.run([sys.executable, "-m", "tfplace", "trace", *args],
                        capture_output=True, text=True, timeout=120)
  return proc.returncode, proc.stdout, proc.stderr


def test_steps_by_the_profilers_markers(marked):
  trace = load_trace(marked)
  assert [(m.name, m.step_num) for m in trace.step_marks] == [
      ("train", 0), ("train", 1), ("train", 2)]
  split = split_steps(trace)
  assert split.found_by == MARKERS and split.marker == "train"
  assert [s.step_num for s in split.steps] == [0, 1, 2]
  for step, part, mark in zip(split.steps, split.traces, trace.step_marks):
    assert {e.name for e in part.events} == OPS and len(part.events) == 4
    assert step.step_time_s == pytest.approx(mark.end_s - mark.start_s)
  assert split.outside == 0


def test_steps_by_op_runs_without_markers(unmarked):
  trace = load_trace(unmarked)
  assert trace.step_marks == ()
  split = split_steps(trace)
  assert split.found_by == OP_RUNS
  assert [s.step_num for s in split.steps] == [None] * 3
  for step, part in zip(split.steps, split.traces):
    assert {e.name for e in part.events} == OPS and len(part.events) == 4
    assert step.step_time_s == pytest.approx(part.span_s())
  starts = [s.start_s for s in split.steps]
  assert starts == sorted(starts)


@pytest.mark.parametrize("which", ["marked", "unmarked"])
def test_summary_is_the_median_step_and_says_so(which, request):
  trace = load_trace(request.getfixturevalue(which))
  split = split_steps(trace)
  summary = summarize(trace)
  times = sorted(s.step_time_s for s in split.steps)
  assert summary.step == split.median_index()
  assert summary.steps[summary.step].step_time_s == times[1]
  assert summary.n_events == 4 and summary.max_op_runs == 1
  assert f"step {summary.step} of 3 (the median)" in str(summary)
  whole = summarize(trace, step="all")
  assert whole.step is None and whole.n_events == 12
  assert whole.max_op_runs == 3 and "the whole trace: 3 steps" in str(whole)
  assert summarize(trace, step=2).span_s == split.traces[2].span_s()


def test_python_api_picks_a_step(marked):
  trace = load_trace(marked)
  assert len(trace.steps().steps) == 3
  assert trace.step(0).events == split_steps(trace).traces[0].events
  assert len(trace.step("all").events) == 12
  with pytest.raises(TraceError, match=r"no step 3: the trace holds 3 steps"):
    trace.step(3)
  with pytest.raises(TraceError, match="give a step's index"):
    summarize(trace, step="last")


def test_one_step_trace_is_one_step():
  one = load_trace(os.path.join(os.path.dirname(__file__), "..", "..",
                                "testdata", "traces", "profile_2cpu"))
  split = split_steps(one)
  assert split.found_by == ONE_STEP and len(split.steps) == 1
  assert summarize(one).steps == () and summarize(one, step=0).step is None
  with pytest.raises(TraceError, match="holds 1 step"):
    summarize(one, step=1)


def test_cli_steps_table_and_step_choice(marked):
  rc, out, err = _cli(marked, "--steps", "--step", "2", "--top", "1")
  assert rc == 0, err
  assert "3 steps, found by the profiler's 'train' step markers:" in out
  assert "step  step_num  at ms  step ms  events" in out
  assert "step 2 of 3" in out and "4 events on 1 device" in out
  rc, out, err = _cli(marked, "--step", "all", "--top", "1")
  assert rc == 0 and "12 events on 1 device" in out, err
  for bad in ("3", "-1", "last"):
    rc, out, err = _cli(marked, "--step", bad)
    assert rc == 2 and "tfplace trace: error:" in err and out == "", err


def test_compare_and_gantt_follow_the_step(marked, unmarked, tmp_path):
  pytest.importorskip("matplotlib")
  rc, out, err = _cli(marked, "--step", "1", "--compare", unmarked, "--json",
                      "--gantt", str(tmp_path / "g.png"))
  assert rc == 0, err
  import json
  doc = json.loads(out)
  before = split_steps(load_trace(marked)).traces[1]
  after = split_steps(load_trace(unmarked)).traces[1]
  assert doc["summary"]["step"] == 1 and doc["summary"]["n_events"] == 4
  assert doc["comparison"]["span_before_s"] == pytest.approx(before.span_s())
  assert doc["comparison"]["span_after_s"] == pytest.approx(after.span_s())
  assert [s["step_num"] for s in doc["summary"]["steps"]] == [0, 1, 2]
  from tfplace.trace.plot import gantt_layout
  assert "step time" in gantt_layout(before).title  # one step: no span note


def test_keras_fit_profile_is_split_at_its_marker(tmp_path):
  # Keras records a "train" marker per batch, but only those the profiler
  # saw whole: profile_batch=(2, 4) holds batch 3's. Batches 2 and 4 ran
  # outside it and are in no step (they used to be read with it as one).
  import numpy as np
  import tensorflow as tf
  model = tf.keras.Sequential([tf.keras.layers.Dense(4, input_shape=(3,))])
  model.compile("sgd", "mse")
  x, y = np.ones((40, 3), "float32"), np.ones((40, 4), "float32")
  model.fit(x, y, batch_size=8, verbose=0, callbacks=[
      tf.keras.callbacks.TensorBoard(str(tmp_path), profile_batch=(2, 4))])
  trace = load_trace(str(tmp_path))
  split = split_steps(trace)
  assert split.found_by == MARKERS and split.marker == "train"
  assert [s.step_num for s in split.steps] == [2]
  # Batches 2 and 4 are outside, at least one batch's worth of events (the
  # profiler's window cuts them: 74 to 2 x 39 + a few seen on one host).
  assert split.outside >= split.steps[0].n_events
  runs = {}
  for e in split.traces[0].ops():
    runs[e.name] = runs.get(e.name, 0) + 1
  assert set(runs.values()) == {1}
  assert "the one step: " in str(summarize(trace))


def test_accelerator_kernels_after_the_marker_stay_in_its_step():
  # A GPU kernel can run after the Python side of its step returned; a host
  # op between two markers is in no step.
  from tfplace.trace.trace import StepMark, TraceEvent, make_trace
  gpu, host = "/device:GPU:0", "/host:CPU"
  events = [TraceEvent(host, "a", "MatMul", 0.0, 1e-3),
            TraceEvent(gpu, "k", "MatMul", 1.5e-3, 1e-3),
            TraceEvent(host, "between", "Sum", 1.6e-3, 1e-4),
            TraceEvent(host, "a", "MatMul", 3e-3, 1e-3)]
  marks = [StepMark("train", 0, 0.0, 1.2e-3),
           StepMark("train", 1, 3e-3, 4.2e-3)]
  split = split_steps(make_trace(events, "gpu", marks))
  assert [len(t.events) for t in split.traces] == [2, 1]
  assert {e.name for e in split.traces[0].events} == {"a", "k"}
  assert split.outside == 1
