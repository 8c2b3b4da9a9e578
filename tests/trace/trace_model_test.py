"""Tests for tfplace.trace.trace (the data model)."""

import pytest

from tfplace.errors import TraceError
from tfplace.trace.trace import TraceEvent, is_transfer_op, make_trace


def test_make_trace_shifts_to_zero_and_sorts():
  t = make_trace([TraceEvent("/d:1", "b", "Relu", 12.0, 1.0),
                  TraceEvent("/d:0", "a", "MatMul", 10.0, 0.5)], "hand")
  assert [e.name for e in t.events] == ["a", "b"]
  assert t.events[0].start_s == 0.0 and t.events[1].start_s == 2.0
  assert t.span_s() == pytest.approx(3.0)
  assert t.devices() == ("/d:0", "/d:1")
  assert [e.name for e in t.events_on("/d:1")] == ["b"]
  assert t.events[1].end_s == pytest.approx(3.0)


def test_no_events_is_an_error():
  with pytest.raises(TraceError, match="no op or transfer events"):
    make_trace([], "empty")


@pytest.mark.parametrize("kwargs", [dict(kind="memcpy"), dict(duration_s=-1.0)])
def test_bad_event_fields(kwargs):
  fields = dict(device="/d:0", name="a", op_type="A", start_s=0.0, duration_s=1.0)
  fields.update(kwargs)
  with pytest.raises(TraceError):
    TraceEvent(**fields)


def test_transfer_op_types():
  assert is_transfer_op("_Send") and is_transfer_op("_Recv")
  assert is_transfer_op("RecvTensor") and is_transfer_op("MEMCPYHtoD")
  assert not is_transfer_op("MatMul") and not is_transfer_op("Send")


def test_a_trace_prints_as_one_line():
  # print(tfplace.load_trace(...)) dumped every event of the trace.
  from tfplace.trace.trace import TraceEvent, make_trace
  trace = make_trace([TraceEvent("/d:0", f"op{k}", "Relu", k * 1e-3, 1e-3)
                      for k in range(500)], "t.json")
  assert str(trace) == repr(trace) == (
      "Trace(500 events on 1 device(s), span 500.000 ms, source='t.json')")
