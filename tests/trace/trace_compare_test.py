"""Tests for tfplace.trace.compare."""

import json

import pytest

from tfplace.trace.compare import compare, format_comparison
from tfplace.trace.trace import TRANSFER, TraceEvent, make_trace

A, B = "/job:localhost/replica:0/task:0/device:CPU:0", "/job:localhost/replica:0/task:0/device:CPU:1"


def test_compare_two_placements():
  before = make_trace([TraceEvent(A, "x", "MatMul", 0.0, 4.0),
                       TraceEvent(A, "y", "Relu", 4.0, 4.0)], "one device")
  after = make_trace([TraceEvent(A, "x", "MatMul", 0.0, 4.0),
                      TraceEvent(B, "t", "_Recv", 4.0, 1.0, TRANSFER, 32, A, B),
                      TraceEvent(B, "y", "Relu", 1.0, 4.0)], "two devices")
  c = compare(before, after)
  assert (c.span_before_s, c.span_after_s) == (8.0, 5.0)
  assert c.span_ratio == pytest.approx(5 / 8)
  assert [(d.device, d.busy_before_s, d.busy_after_s) for d in c.devices] == [
      (A, 8.0, 4.0), (B, 0.0, 4.0)]
  assert (c.transfers_before.count, c.transfers_after.count) == (0, 1)
  assert (c.transfers_after.nbytes, c.transfers_after.time_s) == (32, 1.0)
  assert [(m.name, m.device_before, m.device_after) for m in c.moved_ops] == [("y", A, B)]
  text = format_comparison(c)
  assert "x0.625" in text and "y: " in text
  assert json.loads(json.dumps(c.to_dict()))["span_ratio"] == pytest.approx(0.625)


def test_zero_span_ratio_is_none_in_json():
  zero = make_trace([TraceEvent(A, "x", "NoOp", 0.0, 0.0)], "zero")
  c = compare(zero, zero)
  assert c.span_ratio == float("inf") and c.to_dict()["span_ratio"] is None


def test_report_uses_short_names_top_and_readable_bytes():
  # The comparison printed full device names, raw byte counts ("33872 B")
  # and 20 moved ops whatever --top said.
  before = make_trace([TraceEvent(A, f"op{i}", "Relu", i, 1.0)
                       for i in range(5)] +
                      [TraceEvent(B, "t", "_Recv", 0.0, 1.0, TRANSFER, 3 * 1024,
                                  A, B)], "before")
  after = make_trace([TraceEvent(B, f"op{i}", "Relu", i, 1.0)
                      for i in range(5)], "after")
  text = format_comparison(compare(before, after), max_moved=2)
  assert "/job:localhost" not in text
  assert "  op0: CPU:0 -> CPU:1\n  op1: CPU:0 -> CPU:1\n  ... and 3 more\n" in text
  assert "transfers: 1 (3.0 KiB, 1000.000 ms summed) -> 0\n" in text
  assert "ops in both traces: 5 of 5 (before) and 5 (after)\n" in text
  assert "same model" not in text


def test_traces_of_different_models_are_flagged():
  before = make_trace([TraceEvent(A, "x", "MatMul", 0.0, 4.0)], "a model")
  after = make_trace([TraceEvent(A, "y", "MatMul", 0.0, 2.0)], "another")
  c = compare(before, after)
  assert (c.ops_before, c.ops_after, c.shared_ops) == (1, 1, 0)
  assert "are these traces of the same model?" in format_comparison(c)
  assert c.to_dict()["shared_ops"] == 0


def test_a_compared_trace_read_without_a_worker_says_so():
  # --compare with a profile missing a worker's file compared what was
  # left; only stderr's warning said so.
  from tfplace.trace.trace import SkippedFile
  events = [TraceEvent(A, "x", "MatMul", 0.0, 4.0)]
  skipped = (SkippedFile("run/w1.xplane.pb", "the file is empty"),)
  c = compare(make_trace(events, "whole"),
              make_trace(events, "cut", skipped_files=skipped))
  assert c.skipped_before == () and c.skipped_after == skipped
  assert format_comparison(c).splitlines()[0] == (
      "second trace read without 1 unreadable file(s) of its run: "
      "run/w1.xplane.pb: the file is empty")
  assert json.loads(json.dumps(c.to_dict()))["skipped_after"] == [
      {"path": "run/w1.xplane.pb", "why": "the file is empty"}]
  assert "unreadable" not in format_comparison(compare(
      make_trace(events, "a"), make_trace(events, "b")))
