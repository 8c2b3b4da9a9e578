"""Tests for tfplace.trace.summary on hand-made traces with known numbers."""

import json

import pytest

from tfplace.trace.summary import format_summary, merge_intervals, summarize
from tfplace.trace.trace import TRANSFER, TraceEvent, make_trace

A, B = "/job:localhost/replica:0/task:0/device:CPU:0", "/job:localhost/replica:0/task:0/device:GPU:0"


def _trace():
  """On A: x [0,4), y [2,6) overlapping, z [8,9). On B: w [7,10).
  Transfers A->B: 100 B over [6,7), 50 B over [6.4,6.9); B->A: 10 B over [10,11)."""
  return make_trace([
      TraceEvent(A, "x", "MatMul", 0.0, 4.0),
      TraceEvent(A, "y", "MatMul", 2.0, 4.0),
      TraceEvent(A, "z", "Relu", 8.0, 1.0),
      TraceEvent(B, "w", "Conv2D", 7.0, 3.0),
      TraceEvent(B, "t1", "_Recv", 6.0, 1.0, TRANSFER, 100, A, B),
      TraceEvent(B, "t2", "_Recv", 6.4, 0.5, TRANSFER, 50, A, B),
      TraceEvent(A, "t3", "_Recv", 10.0, 1.0, TRANSFER, 10, B, A),
  ], "hand")


def test_merge_intervals():
  assert merge_intervals([(5, 6), (0, 2), (1, 3), (3, 4)]) == [(0, 4), (5, 6)]


def test_busy_time_is_the_union_and_gaps():
  s = summarize(_trace())
  assert s.span_s == pytest.approx(11.0)
  a, b = s.devices
  assert (a.device, b.device) == (A, B)
  assert a.n_ops == 3
  assert a.busy_s == pytest.approx(7.0)  # [0,6) + [8,9), not 4+4+1 = 9
  assert a.busy_pct == pytest.approx(100 * 7 / 11)
  assert (a.idle_gaps, a.idle_gap_s, a.largest_gap_s) == (1, pytest.approx(2.0), pytest.approx(2.0))
  assert b.busy_s == pytest.approx(3.0)
  assert (b.idle_gaps, b.idle_gap_s, b.largest_gap_s) == (0, 0.0, 0.0)


def test_transfer_totals_per_pair():
  s = summarize(_trace())
  rows = {(t.src_device, t.dst_device): t for t in s.transfers}
  assert (rows[(A, B)].count, rows[(A, B)].nbytes) == (2, 150)
  assert rows[(A, B)].time_s == pytest.approx(1.5)
  assert (rows[(B, A)].count, rows[(B, A)].nbytes) == (1, 10)


def test_top_ops():
  s = summarize(_trace(), top_k=2)
  assert [(o.name, o.total_s) for o in s.top_ops] == [("x", 4.0), ("y", 4.0)]
  assert len(summarize(_trace(), top_k=0).top_ops) == 0


def test_critical_path_follows_transfers():
  s = summarize(_trace())
  # Ends with t3 (ends last, at 11); it is fed by w on its source B; w started
  # at 7 after t1 (A->B) ended; t1 starts at 6 when y ended on A; y overlaps x,
  # so y's predecessor is nothing that ended by 2.
  assert [p.name for p in s.critical_path] == ["y", "t1", "w", "t3"]
  assert s.critical_path_busy_s == pytest.approx(4 + 1 + 3 + 1)


def test_format_and_dict():
  s = summarize(_trace())
  text = format_summary(s)
  assert "busy %" in text and "63.6" in text and "w (Conv2D" in text
  d = json.loads(json.dumps(s.to_dict()))
  assert d["devices"][0]["busy_s"] == pytest.approx(7.0)
  assert d["transfers"][0]["nbytes"] == 150
