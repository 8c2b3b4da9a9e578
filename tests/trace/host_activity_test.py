"""Tests for tfplace.trace.host_activity."""

import os

import pytest

from tfplace.errors import TraceError
from tfplace.trace import host_activity, reader

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "testdata",
                    "traces")


def _xspace(path, lines):
  """Writes an XSpace with one /host:CPU plane: {thread name: [(start ns,
  duration ns, event name)]}, every line starting at 10**18 ns."""
  from tensorflow.tsl.profiler.protobuf import xplane_pb2
  space = xplane_pb2.XSpace()
  plane = space.planes.add(name="/host:CPU")
  k = 0
  for thread, events in lines.items():
    line = plane.lines.add(name=thread, timestamp_ns=10**18)
    for start_ns, dur_ns, name in events:
      k += 1
      plane.event_metadata[k].id, plane.event_metadata[k].name = k, name
      line.events.add(metadata_id=k, offset_ps=start_ns * 1000,
                      duration_ps=dur_ns * 1000)
  path.write_bytes(space.SerializeToString())


def test_self_time_by_kind_by_hand(tmp_path):
  path = tmp_path / "h_1.xplane.pb"
  _xspace(path, {
      "tf_Compute/11": [
          (0, 100_000, "ExecutorState::Process"),
          (10_000, 40_000, "a:MatMul"),
          (50_000, 20_000, "a_S1:_Send"),         # answered a request
          (75_000, 1_000, "b_S2:_Send"),          # stored
          (120_000, 14_000, "ExecutorState::ProcessAsync::Start"),
          (140_000, 0, "ThreadpoolListener::Record")],
      "tf_GrpcWorkerEnvQueues/12": [
          (200_000, 5_000, "ExecutorState::ProcessAsync::Done"),
          (202_000, 3_000, "c:AddV2")]})
  activity = host_activity.host_activity([str(path)])
  # The window: from the first op event (a, 10 us) to the last (c, 205 us).
  assert activity.window_s == pytest.approx(195e-6)
  compute, queues = activity.threads
  assert (compute.worker, compute.thread) == ("h_1", "tf_Compute")
  assert compute.self_s == pytest.approx(
      {"ops": 40e-6, "sends": 21e-6, "recv_issue": 14e-6,
       "executor": 29e-6})  # 100 us from 10 us on, less a and the sends.
  assert compute.counts == {"ops": 1, "sends": 2, "recv_issue": 1,
                            "executor": 1}
  assert compute.cheap_sends == 1
  assert compute.median_s["sends"] == pytest.approx(10.5e-6)
  # Covered: 10-100 us and 120-134 us of the 195 us window.
  assert compute.untraced_s == pytest.approx(91e-6)
  assert queues.self_s == pytest.approx({"ops": 3e-6, "recv_done": 2e-6})
  text = host_activity.format_host_activity(activity)
  assert "| h_1 | tf_Compute | 0.04 | 0.02 | 0.01 | - | 0.03 | - | 0.09 |" \
      in text
  assert "sends: 2, median 10.5 us, 1 under 5 us" in text


def test_a_two_worker_profile_names_the_tasks():
  files = reader.xplane_files(os.path.join(DATA, "profile_2workers"))
  activity = host_activity.host_activity(files)
  compute = {t.worker: t for t in activity.threads
             if t.thread == "tf_Compute"}
  assert set(compute) == {"/job:worker/replica:0/task:0",
                          "/job:worker/replica:0/task:1"}
  # Each worker ran ops, sent one tensor and issued one Recv (make_traces.py:
  # mm0 goes to the second worker, relu1 comes back).
  for t in compute.values():
    assert t.self_s["ops"] > 0
    assert t.counts["sends"] == 1 and t.counts["recv_issue"] == 1
    assert 0 < t.untraced_s < activity.window_s


def test_only_profiler_xplanes_have_host_threads(tmp_path):
  with pytest.raises(TraceError, match="host threads are read from"):
    reader.xplane_files(os.path.join(DATA, "step_stats_2cpu.pbtxt"))
  with pytest.raises(TraceError, match="no such file"):
    reader.xplane_files(str(tmp_path / "missing"))
  path = tmp_path / "h_1.xplane.pb"
  _xspace(path, {"tf_Compute/1": [(0, 10, "ExecutorState::Process")]})
  with pytest.raises(TraceError, match="no TF op events on a host thread"):
    host_activity.host_activity([str(path)])
