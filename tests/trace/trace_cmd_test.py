"""Tests for `tfplace trace` (run as a subprocess, as a user would)."""

import json
import os
import subprocess
import sys

import pytest

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "testdata", "traces")
JSON_TRACE = os.path.join(DATA, "timeline_2workers.json")


def _run(*args):
  proc = subprocess.run([sys.executable, "-m", "tfplace", "trace", *args],
                        capture_output=True, text=True, timeout=120)
  return proc.returncode, proc.stdout, proc.stderr


def test_summary_json_and_outputs(tmp_path):
  pytest.importorskip("matplotlib")
  out_json, out_png = str(tmp_path / "p.json"), str(tmp_path / "g.png")
  rc, out, err = _run(JSON_TRACE, "--json", "--top", "2", "--perfetto", out_json,
                      "--gantt", out_png, "--compare", JSON_TRACE)
  assert rc == 0, err
  doc = json.loads(out)
  assert len(doc["summary"]["top_ops"]) == 2
  assert doc["summary"]["top_ops"][0]["name"] == "a/RandomStandardNormal"
  assert doc["comparison"]["span_ratio"] == pytest.approx(1.0)
  assert doc["comparison"]["moved_ops"] == []
  with open(out_json) as f:
    assert "traceEvents" in json.load(f)
  assert os.path.getsize(out_png) > 0


def test_text_summary():
  rc, out, _ = _run(JSON_TRACE)
  assert rc == 0
  assert "busy ms" in out and "critical path" in out and "mm1" in out


def test_host_threads_of_a_two_worker_profile():
  profile = os.path.join(DATA, "profile_2workers")
  rc, out, err = _run(profile, "--threads")
  assert rc == 0, err
  assert "| /job:worker/replica:0/task:1 | tf_Compute |" in out
  assert "Recv issues: 1" in out
  rc, out, err = _run(profile, "--threads", "--json")
  assert rc == 0, err
  threads = json.loads(out)["host_threads"]["threads"]
  assert {t["worker"] for t in threads if t["thread"] == "tf_Compute"} == {
      "/job:worker/replica:0/task:0", "/job:worker/replica:0/task:1"}


@pytest.mark.parametrize("args", [
    ["/nonexistent.json"],
    [],
    [JSON_TRACE, "--perfetto", "OUT.txt"],
    [JSON_TRACE, "--compare", "/nonexistent.json", "--perfetto", "OUT.json"],
    [JSON_TRACE, "--threads", "--perfetto", "OUT.json"],
])
def test_bad_input_exits_2_and_writes_nothing(tmp_path, args):
  args = [a.replace("OUT", str(tmp_path / "out")) for a in args]
  rc, out, err = _run(*args)
  assert rc == 2
  assert "tfplace trace: error:" in err
  assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("flag", ["--perfetto", "--compare"])
def test_perfetto_onto_an_input_is_refused_and_the_input_kept(tmp_path, flag):
  # `trace mine.json --perfetto mine.json` replaced the user's trace with a
  # lossy re-export; so did writing it over the --compare trace.
  mine = tmp_path / "mine.json"
  mine.write_bytes(open(JSON_TRACE, "rb").read())
  before = mine.read_bytes()
  args = ([str(mine), "--perfetto", str(mine)] if flag == "--perfetto" else
          [JSON_TRACE, "--compare", str(mine), "--perfetto", str(mine)])
  rc, _, err = _run(*args)
  assert rc == 2 and "is also an input of this command" in err, err
  assert mine.read_bytes() == before


def test_perfetto_over_another_json_is_refused_and_a_previous_export_replaced(
    tmp_path):
  # `tfplace trace trace --perfetto p.json` replaced the placement p.json
  # (not an input of this command) with a trace export.
  placement = tmp_path / "p.json"
  placement.write_text('{"placement": {"a": "/device:CPU:0"}}')
  rc, _, err = _run(JSON_TRACE, "--perfetto", str(placement))
  assert rc == 2 and "is not a trace tfplace exported" in err, err
  assert placement.read_text() == '{"placement": {"a": "/device:CPU:0"}}'
  export = tmp_path / "t.json.gz"
  for _ in range(2):  # the second run replaces the first one's export
    rc, out, err = _run(JSON_TRACE, "--perfetto", str(export))
    assert rc == 0, err
  assert f"wrote perfetto trace: {export}" in out


def test_placement_without_gantt_is_a_usage_error(tmp_path):
  # --placement alone was loaded, then silently ignored.
  placement = tmp_path / "p.json"
  placement.write_text('{"placement": {"mm0": "/job:worker/replica:0/task:0/device:CPU:0"}}')
  rc, _, err = _run(JSON_TRACE, "--placement", str(placement))
  assert rc == 2 and "--placement only titles the Gantt chart" in err, err


def test_threads_of_an_eager_profile_say_why_there_is_nothing(tmp_path):
  # --threads answered "the profile has no TF op events on a host thread",
  # with no path and no hint that eager ops have no names.
  from tensorflow.tsl.profiler.protobuf import xplane_pb2
  space = xplane_pb2.XSpace()
  plane = space.planes.add(name="/host:CPU")
  line = plane.lines.add(timestamp_ns=10**18, name="python")
  plane.event_metadata[1].id = 1
  plane.event_metadata[1].name = "EagerLocalExecute: MatMul"
  line.events.add(metadata_id=1, offset_ps=0, duration_ps=10**6)
  run = tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00"
  run.mkdir(parents=True)
  (run / "vm.xplane.pb").write_bytes(space.SerializeToString())
  rc, _, err = _run(str(tmp_path), "--threads")
  assert rc == 2 and str(tmp_path) in err and "tf.function" in err, err


def test_top_0_prints_no_empty_table_headers():
  # --top 0 printed each table's header row with nothing under it.
  rc, out, err = _run(JSON_TRACE, "--top", "0")
  assert rc == 0, err
  for header in ("device  ops", "from -> to", "op  type", "on  events",
                 "start ms", "longest 0 of"):
    assert header not in out
  assert "2 devices, not listed (top 0)" in out
  assert "top ops: not listed (top 0)" in out
  assert "critical path: 7 events, busy" in out


def test_a_truncated_worker_file_leaves_the_other_worker(tmp_path):
  import shutil  # pylint: disable=import-outside-toplevel
  log_dir = tmp_path / "p"
  shutil.copytree(os.path.join(DATA, "profile_2workers"), log_dir)
  run = next((log_dir / "plugins" / "profile").iterdir())
  cut = run / "127.0.0.1_60727.xplane.pb"
  cut.write_bytes(cut.read_bytes()[:cut.stat().st_size // 2])
  rc, out, err = _run(str(log_dir), "--threads")
  assert rc == 0, err
  assert "3 events on 1 device" in out  # task 1's, as named in tasks.json
  assert "| /job:worker/replica:0/task:1 | tf_Compute |" in out
  assert "| /job:worker/replica:0/task:0 |" not in out
  warnings = [line for line in err.splitlines() if str(cut) in line]
  assert len(warnings) == 1 and warnings[0].startswith("W"), err
  assert "not a readable TF profiler xplane" in warnings[0]
  # The report said nothing of it, nor did --json.
  assert out.splitlines()[2].startswith(
      "skipped 1 unreadable file of the run (what it held is missing "
      f"below): {cut.relative_to(log_dir)}: not a readable TF profiler "
      "xplane (")
  rc, out, err = _run(str(log_dir), "--json")
  assert rc == 0, err
  [skipped] = json.loads(out)["summary"]["skipped_files"]
  assert skipped["path"] == str(cut) and "not a readable" in skipped["why"]
  (run / "127.0.0.1_33819.xplane.pb").write_bytes(b"")
  rc, out, err = _run(str(log_dir))
  assert rc == 2 and out == ""
  assert err.startswith("tfplace trace: error: ") and "none of its 2" in err
