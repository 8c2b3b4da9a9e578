"""Tests for tfplace.trace.reader on committed real traces and hand-made ones."""

import gzip
import json
import os
import shutil

import pytest

import tfplace  # noqa: F401  (before TF)
from tfplace.errors import TraceError
from tfplace.trace.reader import load_trace
from tfplace.trace.trace import TRANSFER

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "testdata", "traces")
W0 = "/job:worker/replica:0/task:0/device:CPU:0"
W1 = "/job:worker/replica:0/task:1/device:CPU:0"
L0 = "/job:localhost/replica:0/task:0/device:CPU:0"
L1 = "/job:localhost/replica:0/task:0/device:CPU:1"
OPS = {"a/shape", "Const", "a/RandomStandardNormal", "mm0", "mm1", "relu1", "add", "sum"}


def _path(name):
  return os.path.join(DATA, name)


def test_local_step_stats_text():
  t = load_trace(_path("step_stats_2cpu.pbtxt"))
  assert t.devices() == (L0, L1)
  assert {e.name for e in t.ops()} == OPS | {"_retval_sum_0_0"}
  where = {e.name: e.device for e in t.events}
  assert (where["mm0"], where["mm1"], where["relu1"], where["sum"]) == (L0, L1, L1, L0)
  assert {e.name: e.op_type for e in t.events}["mm1"] == "MatMul"
  assert t.events[0].start_s == 0.0 and t.span_s() > 0
  assert {e.name: e.nbytes for e in t.events}["mm1"] == 64 * 64 * 4


def test_two_worker_run_metadata_has_transfers():
  t = load_trace(_path("run_metadata_2workers.pb"))
  assert t.devices() == (W0, W1)
  assert {e.name for e in t.ops()} == OPS
  pairs = sorted((e.src_device, e.dst_device, e.nbytes) for e in t.transfers())
  assert pairs == [(W0, W1, 16384), (W1, W0, 16384)]
  # mm1 on task 1 waits for mm0's tensor to arrive from task 0.
  ev = {e.name: e for e in t.ops()}
  to_w1 = [e for e in t.transfers() if e.dst_device == W1][0]
  assert ev["mm0"].end_s <= to_w1.end_s <= ev["mm1"].start_s + 1e-9


def test_timeline_json_matches_the_proto():
  proto = load_trace(_path("run_metadata_2workers.pb"))
  chrome = load_trace(_path("timeline_2workers.json"))
  assert chrome.devices() == proto.devices()
  assert {e.name for e in chrome.ops()} == OPS
  assert len(chrome.transfers()) == 2
  d_proto = {e.name: e.duration_s for e in proto.ops()}
  for e in chrome.ops():  # Timeline JSON rounds to whole microseconds.
    assert e.duration_s == pytest.approx(d_proto[e.name], abs=1.01e-6)


@pytest.mark.parametrize("name", ["profile_2cpu", "profile_2cpu/plugins/profile",
                                  "xplane_2cpu.json.gz"])
def test_profiler_trace(name):
  t = load_trace(_path(name))
  assert t.devices() == ("/host:CPU",)
  assert {e.name for e in t.ops()} == {"mm0", "mm1", "relu1", "add", "sum"}
  sends = sorted((e.src_device, e.dst_device) for e in t.transfers())
  assert sends == [(L0, L1), (L1, L0)]


def test_xplane_file_and_directory_agree():
  run = os.path.join(DATA, "profile_2cpu", "plugins", "profile")
  xplane = os.path.join(run, os.listdir(run)[0], "host.xplane.pb")
  assert load_trace(xplane).events == load_trace(_path("profile_2cpu")).events


def test_hand_made_step_stats(tmp_path):
  from tensorflow.core.framework import step_stats_pb2
  ss = step_stats_pb2.StepStats()
  dev = ss.dev_stats.add(device=L0)
  for name, label, start, dur in [
      ("x", "x = MatMul(a, b)", 1000, 100), ("y", "y = Relu(x)", 1050, 100),
      ("_SOURCE", "_SOURCE = NoOp()", 900, 1),
      ("x/_1", "x/_1 = _Send(x @" + L1 + ")", 1150, 20)]:
    dev.node_stats.add(node_name=name, timeline_label=label, all_start_micros=start,
                       all_end_rel_micros=dur)
  dev1 = ss.dev_stats.add(device=L1)
  recv = dev1.node_stats.add(node_name="RecvTensor", all_start_micros=1160,
                             all_end_rel_micros=40,
                             timeline_label=f"[2048B] [1Mb/s] edge_1_x from {L0} to {L1}")
  recv.output.add().tensor_description.allocation_description.requested_bytes = 2048
  path = tmp_path / "ss.pb"
  path.write_bytes(ss.SerializeToString())
  t = load_trace(str(path))
  assert [(e.name, e.start_s, e.kind) for e in t.events] == [
      ("x", 0.0, "op"), ("y", pytest.approx(50e-6), "op"),
      ("x/_1", pytest.approx(150e-6), TRANSFER), ("RecvTensor", pytest.approx(160e-6), TRANSFER)]
  send, recv_ev = t.transfers()
  assert (send.src_device, send.dst_device, send.op_type) == (L0, L1, "_Send")
  assert (recv_ev.src_device, recv_ev.dst_device, recv_ev.nbytes) == (L0, L1, 2048)
  assert t.span_s() == pytest.approx(200e-6)


def _write(tmp_path, name, data):
  path = tmp_path / name
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_bytes(data)
  return str(path)


@pytest.mark.parametrize("name,data,match", [
    ("empty.pb", b"", "empty"),
    ("bad.pb", b"\x08\x96\x01garbage\xff\xfe", "not a Chrome-trace JSON, StepStats"),
    ("bad.pbtxt", b"dev_stats { nonsense: 1 }", "not a Chrome-trace JSON, StepStats"),
    ("bad.json", b'{"traceEvents": [', "not valid JSON"),
    ("bad.json.gz", b"not gzip at all", "not a valid gzip"),
    ("nolist.json", b'{"foo": 1}', "no 'traceEvents' list"),
    ("noevents.json", json.dumps({"traceEvents": [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/d:0"}}]}).encode(),
     "no op or transfer events"),
    ("badts.json", b'{"traceEvents": [{"ph": "X", "pid": 1, "name": "a"}]}', "'ts'"),
    ("empty.xplane.pb", b"", "empty"),
    ("bad.xplane.pb", b"\xff\xff\xff\xffnot an xplane", "xplane"),
])
def test_bad_input(tmp_path, name, data, match):
  with pytest.raises(TraceError, match=match):
    load_trace(_write(tmp_path, name, data))


def test_a_graph_file_is_named_as_such(tmp_path):
  # `tfplace trace model.meta` blamed a UTF-8 decoding error of the text
  # StepStats parser.
  from tensorflow.core.protobuf import meta_graph_pb2
  meta = meta_graph_pb2.MetaGraphDef()
  meta.graph_def.node.add(name="w", op="VarHandleOp")
  meta.meta_info_def.tags.append("\x80 not text")
  path = _write(tmp_path, "model.meta", meta.SerializeToString() + b"\x80")
  with pytest.raises(TraceError) as info:
    load_trace(path)
  assert "a model or graph file?" in str(info.value)
  assert "utf-8" not in str(info.value)


def test_missing_path():
  with pytest.raises(TraceError, match="no such file"):
    load_trace("/nonexistent/trace.json")


def test_profile_dir_without_run(tmp_path):
  (tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00").mkdir(parents=True)
  with pytest.raises(TraceError, match="no profile run"):
    load_trace(str(tmp_path))


def test_newest_run_is_read(tmp_path):
  src = os.path.join(DATA, "profile_2cpu", "plugins", "profile")
  run = os.listdir(src)[0]
  for new in ("2000_01_01_00_00_00", "2099_01_01_00_00_00"):
    shutil.copytree(os.path.join(src, run), tmp_path / "plugins" / "profile" / new)
  (tmp_path / "plugins" / "profile" / "2099_01_01_00_00_00" / "host.xplane.pb").write_bytes(b"")
  with pytest.raises(TraceError, match="2099.*empty"):
    load_trace(str(tmp_path))


def test_keras_tensorboard_log_dir(tmp_path):
  # TensorBoard(log_dir="logs", profile_batch=...) writes the profile under
  # logs/train/plugins/profile/<run>/; `tfplace trace logs` found no run.
  src = os.path.join(DATA, "profile_2cpu", "plugins", "profile")
  run = os.listdir(src)[0]
  shutil.copytree(os.path.join(src, run),
                  tmp_path / "train" / "plugins" / "profile" / run)
  (tmp_path / "validation").mkdir()
  assert load_trace(str(tmp_path)).events == load_trace(
      _path("profile_2cpu")).events


def test_plugins_folder_of_a_log_dir():
  # `tfplace trace logdir/plugins` found no run.
  assert load_trace(_path("profile_2cpu/plugins")).events == load_trace(
      _path("profile_2cpu")).events


def test_gzip_json(tmp_path):
  doc = {"traceEvents": [{"ph": "X", "pid": 1, "tid": 0, "ts": 5, "dur": 2, "name": "A"}]}
  t = load_trace(_write(tmp_path, "t.json.gz", gzip.compress(json.dumps(doc).encode())))
  assert [(e.device, e.name, e.duration_s) for e in t.events] == [("pid 1", "A", 2e-6)]


def test_gpu_streams_and_memcpy(tmp_path):
  from tensorflow.core.framework import step_stats_pb2
  gpu = "/job:localhost/replica:0/task:0/device:GPU:0"
  ss = step_stats_pb2.StepStats()
  for suffix in ("/stream:all", "/stream:7"):  # the same kernel, listed twice
    ss.dev_stats.add(device=gpu + suffix).node_stats.add(
        node_name="conv", timeline_label="conv = Conv2D(x, w)",
        all_start_micros=100, all_end_rel_micros=30)
  ss.dev_stats.add(device=gpu + "/memcpy").node_stats.add(
      node_name="edge_3_x", timeline_label="MEMCPYHtoD 4096 bytes",
      all_start_micros=90, all_end_rel_micros=10)
  path = tmp_path / "gpu.pbtxt"
  path.write_text(str(ss))
  t = load_trace(str(path))
  assert [(e.device, e.name, e.kind) for e in t.events] == [
      (gpu, "edge_3_x", TRANSFER), (gpu, "conv", "op")]
  copy = t.transfers()[0]
  assert (copy.src_device, copy.dst_device, copy.nbytes) == (L0, gpu, 4096)


def test_measure_trace_dir_reads_its_step_stats(tmp_path):
  # A `tfplace measure --trace_dir` directory: a profile and step_stats.pb.
  shutil.copytree(os.path.join(DATA, "profile_2cpu"), tmp_path / "trace")
  shutil.copy(os.path.join(DATA, "run_metadata_2workers.pb"),
              tmp_path / "trace" / "step_stats.pb")
  trace = load_trace(str(tmp_path / "trace"))
  assert set(trace.devices()) >= {W0, W1}
  assert trace.events == load_trace(
      os.path.join(DATA, "run_metadata_2workers.pb")).events


def _xspace(path, line_start_ns, events):
  """Writes an XSpace: one /host:CPU line starting at `line_start_ns`, with
  (offset ns, duration ns, event name, {stat: value}) events."""
  from tensorflow.tsl.profiler.protobuf import xplane_pb2
  space = xplane_pb2.XSpace()
  plane = space.planes.add(name="/host:CPU")
  line = plane.lines.add(timestamp_ns=line_start_ns)
  for k, (offset_ns, dur_ns, name, stats) in enumerate(events, start=1):
    plane.event_metadata[k].id, plane.event_metadata[k].name = k, name
    ev = line.events.add(metadata_id=k, offset_ps=offset_ns * 1000,
                         duration_ps=dur_ns * 1000)
    for j, (stat, value) in enumerate(stats.items(), start=100 * k):
      plane.stat_metadata[j].id, plane.stat_metadata[j].name = j, stat
      ev.stats.add(metadata_id=j, str_value=value)
  space.planes.add(name="Task Environment")
  path.write_bytes(space.SerializeToString())


def test_xplanes_of_two_hosts_by_hand(tmp_path):
  run = tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00"
  run.mkdir(parents=True)
  key = f"{W0};1;{W1};edge_1_a;0:0"
  _xspace(run / "h0_1.xplane.pb", 10**18, [
      (100, 10, "a:MatMul", {}), (90, 50, "ExecutorState::Process", {}),
      (115, 4, "a_S1:_Send", {"key": key})])
  _xspace(run / "h1_2.xplane.pb", 10**18 + 5, [(100, 5, "b:AddV2", {}),
                                                (1, 500, "RunStep/Server:3", {})])
  t = load_trace(str(tmp_path))
  # One clock (absolute ns): a at 10**18 + 100 ns is time 0; b starts 5 ns
  # later; runtime events (no "name:Type") are dropped.
  # h0_1 sends from W0's task, so its host plane is W0 (the only CPU its
  # transfers name); h1_2 has no transfers and keeps its host name.
  assert [(e.device, e.name, e.op_type, e.kind) for e in t.events] == [
      (W0, "a", "MatMul", "op"),
      ("h1_2/host:CPU", "b", "AddV2", "op"),
      (W0, "a_S1", "_Send", TRANSFER)]
  assert [e.start_s for e in t.events] == pytest.approx([0, 5e-9, 15e-9])
  assert [e.duration_s for e in t.events] == pytest.approx([1e-8, 5e-9, 4e-9])
  send = t.transfers()[0]
  assert (send.src_device, send.dst_device) == (W0, W1)
  # One file alone: no host prefix.
  one = load_trace(str(run / "h1_2.xplane.pb"))
  assert [(e.device, e.name) for e in one.events] == [("/host:CPU", "b")]


def test_run_with_one_xplane_per_host_is_merged(tmp_path):
  src = os.path.join(DATA, "profile_2cpu", "plugins", "profile")
  single = os.path.join(src, os.listdir(src)[0], "host.xplane.pb")
  run = tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00"
  run.mkdir(parents=True)
  for host in ("10.0.0.1_6009", "10.0.0.2_6009"):
    shutil.copy(single, run / f"{host}.xplane.pb")
  one = load_trace(single)
  both = load_trace(str(tmp_path / "plugins" / "profile"))
  assert both.devices() == ("10.0.0.1_6009/host:CPU", "10.0.0.2_6009/host:CPU")
  # Two copies of one host: each host's events are the single file's.
  expect = sorted((e.name, e.start_s, e.duration_s) for e in one.events)
  for device in both.devices():
    got = sorted((e.name, e.start_s, e.duration_s)
                 for e in both.events_on(device))
    assert [g[0] for g in got] == [x[0] for x in expect]
    for g, x in zip(got, expect):
      assert g[1:] == pytest.approx(x[1:], abs=1e-9)
  assert load_trace(str(run)).events == both.events


def _plane(space, name, line_start_ns, events):
  """Adds a plane of one line: (offset ns, duration ns, event name, stats)."""
  plane = space.planes.add(name=name)
  line = plane.lines.add(timestamp_ns=line_start_ns)
  for k, (offset_ns, dur_ns, event, stats) in enumerate(events, start=1):
    plane.event_metadata[k].id, plane.event_metadata[k].name = k, event
    ev = line.events.add(metadata_id=k, offset_ps=offset_ns * 1000,
                         duration_ps=dur_ns * 1000)
    for j, (stat, value) in enumerate(stats.items(), start=100 * k):
      plane.stat_metadata[j].id, plane.stat_metadata[j].name = j, stat
      ev.stats.add(metadata_id=j, str_value=value)


def test_one_process_transfers_end_on_its_planes(tmp_path):
  # tf.profiler in one process with a GPU: ops on "/host:CPU" and
  # "/device:GPU:0", but the _Send keys name
  # "/job:localhost/replica:0/task:0/device:{CPU,GPU}:0": the report listed
  # "task:0/GPU:0" beside "GPU:0", and the critical path never crossed.
  from tensorflow.tsl.profiler.protobuf import xplane_pb2
  gpu = "/job:localhost/replica:0/task:0/device:GPU:0"
  space = xplane_pb2.XSpace()
  _plane(space, "/host:CPU", 10**18, [
      (0, 10, "x:RandomUniform", {}),
      (10, 5, "x/_0:_Send", {"key": f"{L0};1;{gpu};edge_1_x;0:0"}),
      (40, 5, "_send_y_0:_Send", {"key": f"{gpu};1;{gpu};y:0;0:0"})])
  _plane(space, "/device:GPU:0", 10**18, [
      (20, 15, "matmul_kernel", {"tf_op": "y:MatMul"})])
  path = tmp_path / "vm.xplane.pb"
  path.write_bytes(space.SerializeToString())
  t = load_trace(str(path))
  assert t.devices() == ("/device:GPU:0", "/host:CPU")
  ends = sorted((e.name, e.src_device, e.dst_device) for e in t.transfers())
  assert ends == [("_send_y_0", "/device:GPU:0", "client"),
                  ("x/_0", "/host:CPU", "/device:GPU:0")]
  from tfplace.trace.summary import summarize
  path_names = [s.name for s in summarize(t).critical_path]
  assert path_names == ["x", "x/_0", "y", "_send_y_0"]


def test_one_cpu_process_sends_from_its_host_plane(tmp_path):
  # A Keras fit traced on a CPU: ops on "/host:CPU", its fetch sent from
  # "/device:CPU:0", which the report showed as a second device.
  from tensorflow.tsl.profiler.protobuf import xplane_pb2
  space = xplane_pb2.XSpace()
  _plane(space, "/host:CPU", 10**18, [
      (0, 10, "range:Range", {}),
      (10, 2, "_send_range_0:_Send",
       {"key": "/device:CPU:0;1;/device:CPU:0;range:0;0:0"})])
  path = tmp_path / "vm.xplane.pb"
  path.write_bytes(space.SerializeToString())
  send = load_trace(str(path)).transfers()[0]
  assert (send.src_device, send.dst_device) == ("/host:CPU", "client")


def test_a_profile_of_eager_ops_says_so(tmp_path):
  # Eager ops have no names; the profile read as "no TF op events" alone.
  from tensorflow.tsl.profiler.protobuf import xplane_pb2
  space = xplane_pb2.XSpace()
  _plane(space, "/host:CPU", 10**18, [
      (0, 10, "EagerLocalExecute: MatMul", {}),
      (20, 5, "EagerExecute", {"eager_op": "Relu"}),
      (21, 3, "EagerLocalExecute: Relu", {})])
  path = tmp_path / "vm.xplane.pb"
  path.write_bytes(space.SerializeToString())
  with pytest.raises(TraceError, match="only 2 eager op runs.*tf.function"):
    load_trace(str(path))
  empty = xplane_pb2.XSpace()
  _plane(empty, "/host:CPU", 10**18, [(0, 10, "TFE_Py_FastPathExecute_C", {})])
  path.write_bytes(empty.SerializeToString())
  with pytest.raises(TraceError, match="run anything between"):
    load_trace(str(path))


def test_a_cluster_clients_transfers_keep_their_names(tmp_path):
  # One file whose transfers name two tasks (a client of a cluster): a
  # worker's CPU:0 is not this host's CPU.
  from tensorflow.tsl.profiler.protobuf import xplane_pb2
  space = xplane_pb2.XSpace()
  _plane(space, "/host:CPU", 10**18, [
      (0, 10, "x:RandomUniform", {}),
      (10, 5, "x/_0:_Send", {"key": f"{L0};1;{W0};edge_1_x;0:0"})])
  path = tmp_path / "vm.xplane.pb"
  path.write_bytes(space.SerializeToString())
  send = load_trace(str(path)).transfers()[0]
  assert (send.src_device, send.dst_device) == (L0, W0)


def _two_worker_run(tmp_path):
  """A copy of the committed two-worker profile: (log dir, run dir)."""
  shutil.copytree(os.path.join(DATA, "profile_2workers"), tmp_path / "p")
  profile = tmp_path / "p" / "plugins" / "profile"
  return tmp_path / "p", profile / os.listdir(profile)[0]


def test_a_truncated_worker_file_is_skipped_with_a_warning(tmp_path, caplog):
  log_dir, run = _two_worker_run(tmp_path)
  whole = load_trace(str(log_dir))
  cut = run / "127.0.0.1_60727.xplane.pb"  # task 0's file (tasks.json)
  cut.write_bytes(cut.read_bytes()[:cut.stat().st_size // 2])
  t = load_trace(str(log_dir))
  # Task 1's events, named by its task as in the whole trace.
  assert {e.device for e in t.events} == {W1}
  assert sorted(e.name for e in t.events) == sorted(
      e.name for e in whole.events if e.device == W1)
  warnings = [r.getMessage() for r in caplog.records
              if r.levelname == "WARNING"]
  assert len(warnings) == 1
  assert str(cut) in warnings[0] and "not a readable" in warnings[0]
  assert "other 1 of the run's 2 files" in warnings[0]
  # It was said only in that warning: the trace (and so its report and
  # --json) did not know a worker was missing.
  [skipped] = t.skipped_files
  assert skipped.path == str(cut)
  assert skipped.why.startswith("not a readable TF profiler xplane (")
  assert "1 unreadable file(s) skipped" in repr(t)
  assert not whole.skipped_files


def test_a_run_with_no_readable_file_fails_naming_each(tmp_path):
  log_dir, run = _two_worker_run(tmp_path)
  for f in run.glob("*.xplane.pb"):
    f.write_bytes(f.read_bytes()[:f.stat().st_size // 2])
  (run / "127.0.0.1_33819.xplane.pb").write_bytes(b"")
  with pytest.raises(TraceError, match=r"none of its 2 xplane files is "
                     r"readable: .*33819.xplane.pb: the file is empty; .*"
                     r"60727.xplane.pb: not a readable"):
    load_trace(str(log_dir))
