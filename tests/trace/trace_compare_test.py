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
