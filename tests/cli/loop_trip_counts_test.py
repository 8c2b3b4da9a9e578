"""`--loop_trip_counts`: a graph whose loop has no static trip count is
refused by `tfplace place` (exit 2, nothing written) until the count is
given; `tfplace import` records a given count in the file it writes."""

import subprocess
import sys

import pytest

import tfplace  # noqa: F401
import tensorflow as tf

from tfplace.cli import import_cmd, run_helpers
from tfplace.errors import TfplaceError
from tfplace.graph import control_flow, graph_io
from tfplace.graph.importers import import_graph


def _dynamic_loop_graph_file(tmp_path) -> str:
  """A MetaGraphDef of a training step looping a random number of times."""
  w = tf.Variable(tf.ones([4, 4]) * 0.1)

  @tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32)])
  def step(x):
    with tf.GradientTape() as tape:
      n = tf.random.uniform([], 1, 5, dtype=tf.int32)
      _, h = tf.while_loop(lambda i, h: i < n,
                           lambda i, h: (i + 1, tf.tanh(h @ w)), [0, x])
      loss = tf.reduce_sum(h)
    w.assign_sub(0.1 * tape.gradient(loss, w))
    return loss

  g = import_graph(step, loop_trip_counts={"while": 1})
  for node in g.graph_def.node:  # As TensorFlow wrote it: no count recorded.
    node.attr.pop(control_flow.TRIP_COUNT_ATTR, None)
  path = str(tmp_path / "loop.meta")
  graph_io.write_graph_file(path, graph_io.meta_graph_def_for(g.graph_def,
                                                              g.fetches))
  return path


def _place(*args):
  return subprocess.run([sys.executable, "-m", "tfplace.cli.main", "place",
                         *args], capture_output=True, text=True, timeout=120)


def test_place_refuses_then_accepts_a_dynamic_loop(tmp_path):
  graph = _dynamic_loop_graph_file(tmp_path)
  out = tmp_path / "p.json"
  proc = _place(graph, "--cluster", "k80x2", "--out", str(out))
  assert proc.returncode == 2
  assert "'while' (While)" in proc.stderr
  assert "--loop_trip_counts=while=N" in proc.stderr
  assert not out.exists()
  proc = _place(graph, "--cluster", "k80x2", "--out", str(out),
                "--loop_trip_counts", "while=6", "--json")
  assert proc.returncode == 0, proc.stderr
  assert out.exists()


def test_import_records_given_counts(tmp_path):
  graph = _dynamic_loop_graph_file(tmp_path)
  out = str(tmp_path / "recorded.meta")
  summary = import_cmd.run(graph, None, out, "while=6")
  assert summary["loops"]["while"]["trip_count"] == 6
  again = import_graph(out)
  loop = again.ops[again.index["while"]]
  assert (loop.body.trip_count, loop.body.trip_count_source) == (
      6, "recorded in the graph")


@pytest.mark.parametrize("text", ["while", "while=x", "=3", "while=-2"])
def test_malformed_flag_is_refused(text):
  with pytest.raises(TfplaceError, match="loop=N"):
    run_helpers.parse_loop_trip_counts(text)


def test_flag_parses_nested_names():
  assert run_helpers.parse_loop_trip_counts("a=1, outer/inner=2") == {
      "a": 1, "outer/inner": 2}
  assert run_helpers.parse_loop_trip_counts(None) == {}
