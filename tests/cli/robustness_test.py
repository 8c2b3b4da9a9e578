"""What a user hits first: output paths, Ctrl-C, and a quiet plain run."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from tfplace import interrupts
from tfplace.cli.quiet import _LineFilter
from tfplace.errors import Interrupted, OutputError
from tfplace.io_utils import atomic_write, check_out_path

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
GRAPH = os.path.join(ROOT, "testdata", "mlp_2tower.pbtxt")
META = os.path.join(ROOT, "testdata", "mlp_2tower_ref.meta.pbtxt")


def tfplace(*args, timeout=120):
  return subprocess.run([sys.executable, "-m", "tfplace.cli.main", *args],
                        capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("verb_args", [
    ("import", GRAPH), ("place", GRAPH, "--cluster", "k80x2"),
])
def test_out_naming_a_directory_is_one_message_and_exit_2(tmp_path, verb_args):
  proc = tfplace(*verb_args, "--out", str(tmp_path))
  assert proc.returncode == 2, proc.stderr
  assert proc.stderr.strip().splitlines()[-1].endswith(
      f"--out {tmp_path} is a directory")
  assert "Traceback" not in proc.stderr


def test_out_naming_an_input_is_refused_and_the_input_kept(tmp_path):
  graph = tmp_path / "g.pbtxt"
  graph.write_bytes(open(GRAPH, "rb").read())
  link = tmp_path / "link.pbtxt"
  link.symlink_to(graph)
  for out in (graph, link):
    proc = tfplace("place", str(graph), "--cluster", "k80x2", "--placer",
                   "hash", "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    assert "is also an input" in proc.stderr and "Traceback" not in proc.stderr
  assert graph.read_bytes() == open(GRAPH, "rb").read()
  with pytest.raises(OutputError, match="is also an input"):
    check_out_path(str(graph), inputs=[None, "k80x2", str(link)])
  check_out_path(str(tmp_path / "new.json"), inputs=[str(graph)])


def test_out_in_missing_folders_makes_them(tmp_path):
  placement = tmp_path / "new" / "p.json"
  assert tfplace("place", META, "--cluster", "k80x2", "--placer", "hash",
                 "--out", str(placement)).returncode == 0
  assert json.loads(placement.read_text())["placement"]
  out = tmp_path / "no" / "such" / "placed.pbtxt"
  proc = tfplace("apply", META, str(placement), "--out", str(out))
  assert proc.returncode == 0, proc.stderr
  assert out.stat().st_size > 0


def test_out_under_a_file_exits_2_and_makes_nothing(tmp_path):
  placement = tmp_path / "p.json"
  assert tfplace("place", META, "--cluster", "k80x2", "--placer", "hash",
                 "--out", str(placement)).returncode == 0
  out = placement / "sub" / "placed.pbtxt"
  proc = tfplace("apply", META, str(placement), "--out", str(out))
  assert proc.returncode == 2
  assert "is a file, not a directory" in proc.stderr
  assert "Traceback" not in proc.stderr
  assert placement.is_file()
  with pytest.raises(OutputError, match="is a file, not a directory"):
    check_out_path(str(out))


def test_a_failed_run_leaves_no_empty_folders(tmp_path):
  out = tmp_path / "made" / "p.json"
  proc = tfplace("place", META, "--cluster", "no_such_cluster", "--placer",
                 "hash", "--out", str(out))
  assert proc.returncode == 2
  assert not (tmp_path / "made").exists()


def test_atomic_write_to_a_directory_is_an_output_error(tmp_path):
  with pytest.raises(OutputError, match="is a directory"):
    atomic_write(str(tmp_path), "x")
  with pytest.raises(OutputError, match="--out is required"):
    check_out_path(None)


def test_nothing_is_written_after_an_interrupt_unless_allowed(tmp_path):
  path = tmp_path / "out.json"
  path.write_text("old")
  interrupts.note_interrupt()
  try:
    with pytest.raises(Interrupted):
      atomic_write(str(path), "new")
    assert path.read_text() == "old"
    with interrupts.writes_allowed():
      atomic_write(str(path), "best so far")
    assert path.read_text() == "best so far"
  finally:
    interrupts.clear()


def _interrupt_when(cmd, marker):
  """Runs `cmd`, sends SIGINT once its stderr shows `marker`; returns
  (exit status, stderr)."""
  proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
  seen = []
  for line in proc.stderr:
    seen.append(line)
    if marker in line:
      proc.send_signal(signal.SIGINT)
      break
  rest = proc.communicate(timeout=120)[1]
  return proc.returncode, "".join(seen) + rest


def test_ctrl_c_during_a_verb_exits_130_and_writes_nothing(tmp_path):
  out = tmp_path / "nmt.meta"
  # -v 0 shows tfplace's info lines: the build is under way after this one
  # (TensorFlow's "oneDNN" start-up line, the marker before, is printed only
  # on some CPUs).
  code, err = _interrupt_when(
      [sys.executable, "-m", "tfplace.cli.main", "import", "--model", "nmt",
       "--out", str(out), "-v", "0"], "building benchmark model nmt")
  assert code == 130, err
  assert err.strip().splitlines()[-1] == "tfplace import: interrupted"
  assert "Traceback" not in err
  assert not out.exists()


def test_ctrl_c_during_the_main_job_keeps_the_old_results(tmp_path):
  old = tmp_path / "best_placement.json"
  old.write_text("old")
  code, err = _interrupt_when(
      [sys.executable, os.path.join(ROOT, "scripts", "place_model.py"),
       "--model", "rnnlm", "--out_dir", str(tmp_path), "-v", "0"],
      "building rnnlm")
  assert code == 130, err
  assert err.strip().splitlines()[-1] == "place_model: interrupted"
  assert "Traceback" not in err
  assert old.read_text() == "old"


def test_a_plain_run_prints_nothing_on_stderr_and_v0_shows_logs(tmp_path):
  proc = tfplace("place", GRAPH, "--cluster", "k80x2", "--out",
                 str(tmp_path / "p.json"))
  assert proc.returncode == 0
  assert proc.stderr == ""
  assert proc.stdout.startswith("m_etf: predicted step time")
  proc = tfplace("place", GRAPH, "--cluster", "k80x2", "--out",
                 str(tmp_path / "p.json"), "-v", "0")
  assert "imported mlp_2tower" in proc.stderr


def test_a_script_failing_after_start_script_still_shows_why(tmp_path):
  # The filter a script starts before its imports is drained at the exit.
  script = tmp_path / "fails.py"
  script.write_text(
      "import sys\n"
      f"sys.path.insert(0, {ROOT!r})\n"
      "from tfplace.cli.app_runner import start_script\n"
      "start_script('fails')\n"
      "import tensorflow\n"
      "raise ImportError('a module it needs is missing')\n")
  proc = subprocess.run([sys.executable, str(script)], capture_output=True,
                        text=True, timeout=120)
  assert proc.returncode == 1
  assert proc.stderr.rstrip().endswith(
      "ImportError: a module it needs is missing"), proc.stderr[-2000:]
  assert "0000 00:00" not in proc.stderr


def test_only_tensorflows_pre_init_noise_is_filtered():
  f = _LineFilter()
  assert not f.keep("WARNING: All log messages before absl::InitializeLog() "
                    "is called are written to STDERR\n")
  assert not f.keep("I0000 00:00:1795443880.904543   25831 port.cc:153] "
                    "oneDNN custom operations are on.\n")
  cuinit = ("E0000 00:00:1795443890.625949   25831 cuda_platform.cc:52] "
            "failed call to cuInit: INTERNAL: CUDA error\n")
  assert f.keep(cuinit)  # No "no driver" line yet: a real GPU error shows.
  assert not f.keep("I0000 00:00:1795443880.905952   25831 cudart_stub.cc:31]"
                    " Could not find cuda drivers on your machine, GPU will "
                    "not be used.\n")
  assert not f.keep(cuinit)
  assert f.keep("E1123 14:24:57.739610 1 op_kernel.cc:1] OP_REQUIRES failed\n")
  assert not f.keep("Starting to trace for 1148 ms. Remaining attempt(s): 0\n")
  assert f.keep("Starting to trace for a while\n")
  assert f.keep("tfplace place: error: unknown placer\n")
  # The gym package's notice, printed when tf-agents imports it (every
  # learned placer's run began with it).
  for line in ("Gym has been unmaintained since 2022 and does not support "
               "NumPy 2.0 amongst other critical functionality.",
               "Please upgrade to Gymnasium, the maintained drop-in "
               "replacement of Gym, or contact the authors of your software "
               "and request that they upgrade.",
               "See the migration guide at https://gymnasium.farama.org/"
               "introduction/migration_guide/ for additional information."):
    assert not f.keep(line + "\n")
  assert f.keep("Gym has been great\n")


def test_a_reader_that_stops_reading_ends_the_run_quietly():
  # `tfplace info g.meta | head` ended in a BrokenPipeError traceback.
  proc = subprocess.Popen([sys.executable, "-m", "tfplace", "info", GRAPH,
                           "--json"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
  proc.stdout.close()  # The reader is gone before anything is written.
  err = proc.stderr.read().decode()
  assert proc.wait(timeout=120) == 141
  assert "Traceback" not in err and "BrokenPipe" not in err, err[-2000:]


def test_a_swallowed_interrupt_prints_no_traceback():
  # TensorFlow's C++ code can catch a Ctrl-C's KeyboardInterrupt and print
  # it (PyErr_Print goes through sys.excepthook): once the flag is set,
  # that traceback is dropped; other exceptions still print theirs.
  code = textwrap.dedent("""
      import sys
      from tfplace import interrupts
      interrupts.install("prog")
      interrupts.started()
      def report(kind):
        try:
          raise kind("from C++")
        except BaseException as e:
          sys.excepthook(type(e), e, e.__traceback__)
      report(KeyboardInterrupt)  # Not yet interrupted: printed.
      interrupts.note_interrupt()
      report(KeyboardInterrupt)  # Dropped.
      report(ValueError)
      class Dying:
        def __del__(self):
          raise KeyboardInterrupt("in __del__")
      Dying()  # Unraisable: dropped too.
      """)
  proc = subprocess.run([sys.executable, "-c", code], capture_output=True,
                        text=True, timeout=120)
  assert proc.returncode == 0, proc.stderr
  assert proc.stderr.count("KeyboardInterrupt: from C++") == 1
  assert "ValueError: from C++" in proc.stderr
  assert "in __del__" not in proc.stderr
