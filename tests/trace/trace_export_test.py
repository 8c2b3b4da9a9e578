"""Tests for tfplace.trace.export: Chrome-trace JSON and the round trip."""

import gzip
import json
import os

import pytest

from tfplace.errors import TraceError
from tfplace.trace.export import to_chrome_trace, write_perfetto
from tfplace.trace.reader import load_trace
from tfplace.trace.trace import TRANSFER, TraceEvent, make_trace

A, B = "/job:localhost/replica:0/task:0/device:CPU:0", "/job:localhost/replica:0/task:0/device:CPU:1"


def _trace():
  return make_trace([
      TraceEvent(A, "x", "MatMul", 0.0, 0.004, nbytes=64),
      TraceEvent(A, "y", "Relu", 0.002, 0.001),
      TraceEvent(B, "w", "Conv2D", 0.007, 0.003),
      TraceEvent(B, "t1", "_Recv", 0.006, 0.001, TRANSFER, 100, A, B),
  ], "hand")


def _same_events(a, b):
  assert len(a.events) == len(b.events)
  for x, y in zip(a.events, b.events):
    assert (x.device, x.name, x.op_type, x.kind, x.nbytes, x.src_device, x.dst_device) == (
        y.device, y.name, y.op_type, y.kind, y.nbytes, y.src_device, y.dst_device)
    assert x.start_s == pytest.approx(y.start_s, abs=1e-9)
    assert x.duration_s == pytest.approx(y.duration_s, abs=1e-9)


def test_chrome_trace_layout():
  doc = to_chrome_trace(_trace())
  assert doc["displayTimeUnit"] == "ms"
  names = {(e["pid"], e["args"]["name"]) for e in doc["traceEvents"]
           if e["ph"] == "M" and e["name"] == "process_name"}
  assert names == {(1, A), (2, B), (3, "transfers")}
  xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
  w = [e for e in xs if e["args"]["name"] == "w"][0]
  # Slices are named by op name (what a user searches for); the type is in
  # args.
  assert (w["pid"], w["ts"], w["dur"], w["name"]) == (2, 7000.0, 3000.0, "w")
  assert w["args"]["op_type"] == "Conv2D"
  t1 = [e for e in xs if e["args"]["name"] == "t1"][0]
  assert t1["pid"] == 3 and t1["args"]["src_device"] == A
  json.dumps(doc)  # serializable


@pytest.mark.parametrize("name", ["out.json", "out.json.gz"])
def test_round_trip(tmp_path, name):
  path = str(tmp_path / name)
  write_perfetto(_trace(), path)
  if name.endswith(".gz"):
    with gzip.open(path) as f:
      assert "traceEvents" in json.load(f)
  _same_events(load_trace(path), _trace())


def test_round_trip_of_a_real_trace(tmp_path):
  data = os.path.join(os.path.dirname(__file__), "..", "..", "testdata", "traces")
  real = load_trace(os.path.join(data, "run_metadata_2workers.pb"))
  write_perfetto(real, str(tmp_path / "real.json"))
  _same_events(load_trace(str(tmp_path / "real.json")), real)


def test_bad_extension_writes_nothing(tmp_path):
  with pytest.raises(TraceError, match=".json"):
    write_perfetto(_trace(), str(tmp_path / "out.txt"))
  assert os.listdir(tmp_path) == []
