"""The readable side of traces: the one-page report (`str(summary)`), task
names for server-cluster xplane traces, short distinct device labels, the
client transfer, the Gantt layout and title."""

import dataclasses
import os
import shutil

import pytest

import tfplace  # noqa: F401
from tfplace.placement import Placement, PlacementMetadata
from tfplace.trace.plot import gantt_layout
from tfplace.trace.reader import load_trace
from tfplace.trace.summary import summarize
from tfplace.trace.trace import (CLIENT, TRANSFER, SkippedFile, TraceEvent,
                                 make_trace, short_device_names)

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "testdata",
                    "traces")
TWO_WORKERS = os.path.join(DATA, "profile_2workers")
W0 = "/job:worker/replica:0/task:0/device:CPU:0"
W1 = "/job:worker/replica:0/task:1/device:CPU:0"
CLIENT_CPU = "/job:localhost/replica:0/task:0/device:CPU:0"


def _long_path_trace():
  """On W0: 150 Consts (1 us each) then a MatMul (2 ms); on W1, after a
  transfer W0 -> W1, 40 Identity ops and a Conv2D (3 ms); 4 ops elsewhere."""
  events, t = [], 0.0
  for k in range(150):
    events.append(TraceEvent(W0, f"c{k}", "Const", t, 1e-6))
    t += 1e-6
  events.append(TraceEvent(W0, "mm", "MatMul", t, 2e-3))
  t += 2e-3
  events.append(TraceEvent(W1, "x", "_Recv", t, 1e-4, TRANSFER, 64, W0, W1))
  t += 1e-4
  for k in range(40):
    events.append(TraceEvent(W1, f"i{k}", "Identity", t, 1e-6))
    t += 1e-6
  events.append(TraceEvent(W1, "conv", "Conv2D", t, 3e-3))
  for k in range(4):
    events.append(TraceEvent(f"/job:worker/replica:0/task:{k + 2}/device:CPU:0",
                             f"r{k}", "Relu", 0.0, 1e-5 * (k + 1)))
  return make_trace(events, "hand")


def test_print_summary_is_a_readable_page():
  summary = summarize(_long_path_trace(), top_k=3)
  text = str(summary)
  assert text.startswith("trace: hand") and "TraceSummary(" not in text
  assert len(text.splitlines()) < 45
  # 193 events on the critical path, summarized in segments: the Consts and
  # Identities are counted, not listed.
  assert "critical path: 193 events" in text
  assert "mm (MatMul, 2.000 ms) + 150 trivial" in text
  assert "conv (Conv2D, 3.000 ms) + 40 trivial" in text
  assert "c17" not in text and "i3" not in text
  # Labelled columns, and --top limits every list.
  assert "start ms  busy ms  events  where" in text
  assert "... 3 more devices" in text
  assert "longest 3 of 3 critical-path segments" in text
  assert "top 3 ops by total time" in text
  # Devices get short distinct names, listed once in full.
  assert f"task:0/CPU:0 = {W0}" in text
  assert str(summarize(_long_path_trace(), top_k=1)).count("trivial") == 1


def test_xplanes_of_a_server_cluster_are_named_by_task(tmp_path):
  trace = load_trace(TWO_WORKERS)
  assert trace.devices() == (W0, W1)
  ends = {(e.src_device, e.dst_device) for e in trace.transfers()}
  assert ends == {(W0, W1), (W1, W0)}
  assert {e.name for e in trace.events_on(W1)} >= {"mm1", "relu1"}
  # Without tasks.json the tasks come from where each host's _Send events
  # send from.
  copy = tmp_path / "run"
  run = os.path.join(TWO_WORKERS, "plugins", "profile")
  shutil.copytree(os.path.join(run, os.listdir(run)[0]), copy)
  os.remove(copy / "tasks.json")
  again = load_trace(str(copy))
  assert again.devices() == (W0, W1)
  assert [(e.device, e.name) for e in again.events] == [
      (e.device, e.name) for e in trace.events]


def _xspace(path, events):
  """An XSpace file: one /host:CPU line of (offset ns, duration ns,
  "name:Type", {stat: value}) events."""
  from tensorflow.tsl.profiler.protobuf import xplane_pb2
  space = xplane_pb2.XSpace()
  plane = space.planes.add(name="/host:CPU")
  line = plane.lines.add(timestamp_ns=10**18)
  for k, (offset_ns, dur_ns, name, stats) in enumerate(events, start=1):
    plane.event_metadata[k].id, plane.event_metadata[k].name = k, name
    ev = line.events.add(metadata_id=k, offset_ps=offset_ns * 1000,
                         duration_ps=dur_ns * 1000)
    for j, (stat, value) in enumerate(stats.items(), start=100 * k):
      plane.stat_metadata[j].id, plane.stat_metadata[j].name = j, stat
      ev.stats.add(metadata_id=j, str_value=value)
  path.write_bytes(space.SerializeToString())


def test_fetch_to_the_client_is_not_a_self_transfer(tmp_path):
  run = tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00"
  run.mkdir(parents=True)
  _xspace(run / "h0_1.xplane.pb", [
      (100, 10, "loss:Sum", {}),
      (115, 4, "_send_loss_0:_Send", {"key": f"{W0};1;{W0};loss:0;0:0"}),
      (120, 4, "a_S1:_Send", {"key": f"{W0};1;{W1};edge_1_a;0:0"})])
  _xspace(run / "h1_2.xplane.pb", [
      (130, 5, "b:AddV2", {}),
      (125, 4, "b_R2:_Recv", {"key": f"{W0};1;{W1};edge_1_a;0:0"})])
  trace = load_trace(str(tmp_path))
  assert trace.devices() == (W0, W1)
  fetch = [e for e in trace.transfers() if e.name == "_send_loss_0"][0]
  assert (fetch.src_device, fetch.dst_device) == (W0, CLIENT)
  assert all(e.src_device != e.dst_device for e in trace.transfers())
  layout = gantt_layout(trace)
  labels = [lane[0] for lane in layout.transfer_lanes]
  assert "task:0/CPU:0 -> client: 1 transfer" in labels


def test_short_names_stay_distinct():
  assert short_device_names([W0, W1]) == {W0: "task:0/CPU:0",
                                          W1: "task:1/CPU:0"}
  # A worker's task 0 and the client's task 0 keep their job.
  assert short_device_names([W0, CLIENT_CPU]) == {
      W0: "worker/task:0/CPU:0", CLIENT_CPU: "localhost/task:0/CPU:0"}
  gpu = "/job:localhost/replica:0/task:0/device:GPU:0"
  assert short_device_names([CLIENT_CPU, gpu]) == {CLIENT_CPU: "CPU:0",
                                                   gpu: "GPU:0"}


def test_gantt_layout_title_rows_and_lanes():
  trace = load_trace(TWO_WORKERS)
  layout = gantt_layout(trace)
  assert [r[0] for r in layout.device_rows] == ["task:0/CPU:0", "task:1/CPU:0"]
  assert "step time" in layout.title and TWO_WORKERS not in layout.title
  assert [lane[0] for lane in layout.transfer_lanes] == [
      "task:0/CPU:0 -> task:1/CPU:0: 1 transfer",
      "task:1/CPU:0 -> task:0/CPU:0: 1 transfer"]
  assert [(lane[2], lane[3]) for lane in layout.transfer_lanes] == [
      (0, 1), (1, 0)]
  placement = Placement({"mm0": W0, "mm1": W1}, PlacementMetadata(
      placer="m_etf", predicted_step_time_s=0.002))
  title = gantt_layout(trace, placement).title
  assert title.startswith("m_etf placement on 2 devices: step time ")
  assert title.endswith("(predicted 2.000 ms)")


def test_gantt_png_with_a_placement(tmp_path):
  pytest.importorskip("matplotlib")
  from tfplace.trace.plot import gantt
  path = tmp_path / "g.png"
  gantt(load_trace(TWO_WORKERS), str(path),
        placement=Placement({"mm0": W0, "mm1": W1}))
  assert path.read_bytes()[:4] == b"\x89PNG"


def test_a_placement_that_did_not_run_is_refused_for_the_chart():
  # The chart of a 2-worker m_etf trace was titled with another placement
  # (local_search, everything on one worker) and its predicted time.
  from tfplace.errors import TfplaceError
  from tfplace.trace.plot import check_placement_matches
  trace = load_trace(TWO_WORKERS)
  check_placement_matches(trace, Placement({"mm0": W0, "mm1": W1}))
  with pytest.raises(TfplaceError, match="2 of 2 traced ops ran elsewhere"):
    check_placement_matches(trace, Placement({"mm0": W1, "mm1": W0}))
  with pytest.raises(TfplaceError, match="shares no op"):
    check_placement_matches(trace, Placement({"other": W0}))
  # One op of two elsewhere (a TF placer's choice, say) still draws.
  check_placement_matches(trace, Placement({"mm0": W0, "mm1": W0}))


def test_transfer_time_is_called_summed_and_unknown_bytes_explained():
  # "time ms" of 25 overlapping transfers read 7.4 ms in a 5.4 ms step, and
  # a profiler trace's bytes printed as a bare "?".
  trace = make_trace([
      TraceEvent(W1, f"r{k}", "_Recv", 0.0, 1e-3, TRANSFER, 0, W0, W1)
      for k in range(3)] + [TraceEvent(W0, "a", "MatMul", 0.0, 2e-3)], "hand")
  text = str(summarize(trace))
  assert "summed ms" in text and "time ms" not in text
  assert "task:0/CPU:0 -> task:1/CPU:0      3  ?          3.000" in text
  assert "(bytes ?: the trace does not record them" in text


def test_a_skipped_file_is_one_line_under_the_counts_and_in_the_dict(
    tmp_path):
  # A worker's unreadable file was said only in a warning on stderr.
  run = tmp_path / "plugins" / "profile" / "run"
  events = [TraceEvent("/device:CPU:0", "a", "MatMul", 0.0, 1e-3),
            TraceEvent("/device:CPU:0", "b", "Relu", 2e-3, 1e-3)]
  skipped = (SkippedFile(str(run / "h_1.xplane.pb"), "the file is empty"),)
  trace = make_trace(events, str(tmp_path), skipped_files=skipped)
  summary = summarize(trace)
  assert summary.skipped_files == skipped
  assert list(summary.to_dict()["skipped_files"]) == [
      {"path": str(run / "h_1.xplane.pb"), "why": "the file is empty"}]
  lines = str(summary).splitlines()
  assert lines[2] == (
      "skipped 1 unreadable file of the run (what it held is missing "
      "below): plugins/profile/run/h_1.xplane.pb: the file is empty")
  assert "skipped" not in str(summarize(make_trace(events, "hand")))
  # A trace of several steps: each step is read without the file too.
  steps = make_trace(events + [dataclasses.replace(e, start_s=e.start_s + 1)
                               for e in events], "hand",
                     skipped_files=skipped)
  assert steps.step(1).skipped_files == skipped
  assert len(summarize(steps).steps) == 2
  assert "skipped 1" in str(summarize(steps))
