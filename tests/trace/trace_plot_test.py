"""Tests for tfplace.trace.plot (skipped without matplotlib)."""

import os

import pytest

from tfplace.errors import TfplaceError
from tfplace.trace.plot import gantt
from tfplace.trace.trace import TRANSFER, TraceEvent, make_trace

pytest.importorskip("matplotlib")

A, B = "/job:localhost/replica:0/task:0/device:CPU:0", "/job:localhost/replica:0/task:0/device:CPU:1"


def _trace():
  return make_trace([TraceEvent(A, "x", "MatMul", 0.0, 0.004),
                     TraceEvent(B, "w", "Conv2D", 0.005, 0.003),
                     TraceEvent(B, "t", "_Recv", 0.004, 0.001, TRANSFER, 8, A, B)], "hand")


def test_gantt_writes_a_png(tmp_path):
  path = tmp_path / "g.png"
  gantt(_trace(), str(path), title="hand")
  data = path.read_bytes()
  assert data[:8] == b"\x89PNG\r\n\x1a\n"
  assert len(data) > 2000


def test_gantt_rejects_other_extensions(tmp_path):
  with pytest.raises(TfplaceError, match=".png"):
    gantt(_trace(), str(tmp_path / "g.pdf"))
  assert os.listdir(tmp_path) == []
