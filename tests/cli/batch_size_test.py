"""End-to-end tests of --batch_size / --input_shapes on the verbs that read
a graph: the prediction is at the batch given, the imported file keeps it,
and a shape that does not fit exits 2 with nothing written."""

import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.graph import graph_io, input_shapes

V1 = tf.compat.v1


@pytest.fixture(scope="module")
def meta_path(tmp_path_factory):
  """A TF1 MLP whose images [?, 256] and labels [?] are placeholders."""
  graph = tf.Graph()
  with graph.as_default():
    images = V1.placeholder(tf.float32, [None, 256], name="images")
    labels = V1.placeholder(tf.int64, [None], name="labels")
    hidden = tf.nn.relu(images @ V1.get_variable("w", [256, 512]))
    logits = hidden @ V1.get_variable("out", [512, 10])
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits), name="loss")
    V1.train.GradientDescentOptimizer(0.1).minimize(loss, name="train")
    path = str(tmp_path_factory.mktemp("g") / "mlp.meta")
    V1.train.export_meta_graph(filename=path)
  return path


def _tfplace(*args):
  return subprocess.run([sys.executable, "-m", "tfplace", *args],
                        capture_output=True, text=True, timeout=120)


def _predicted(meta_path, tmp_path, *sizes):
  out = tmp_path / f"p{len(list(tmp_path.iterdir()))}.json"
  proc = _tfplace("place", meta_path, "--cluster", "k80x2", "--placer",
                  "single_gpu", "--out", str(out), "--json", *sizes)
  assert proc.returncode == 0, proc.stderr
  return json.loads(proc.stdout.strip().splitlines()[-1])[
      "predicted_step_time_s"]


def test_place_predicts_at_the_batch_given(meta_path, tmp_path):
  default = _predicted(meta_path, tmp_path)  # unknown dimensions -> 1
  large = _predicted(meta_path, tmp_path, "--batch_size", "4096")
  shaped = _predicted(meta_path, tmp_path, "--input_shapes",
                      "images=4096x256,labels=4096")
  assert large > 2 * default
  assert shaped == large


def test_import_keeps_the_shapes(meta_path, tmp_path):
  out = str(tmp_path / "sized.meta")
  proc = _tfplace("import", meta_path, "--batch_size", "32", "--out", out)
  assert proc.returncode == 0, proc.stderr
  _, meta = graph_io.read_graph_file(out)
  shapes = {n.name: input_shapes.declared_shape(n)
            for n in meta.graph_def.node if n.op == "Placeholder"}
  assert shapes == {"images": (32, 256), "labels": (32,)}


def test_bad_sizes_exit_2_and_write_nothing(meta_path, tmp_path):
  out = tmp_path / "p.json"
  out.write_text("keep")
  for sizes, message in (
      (["--input_shapes", "images=32x255"], "does not fit its declared"),
      (["--batch_size", "0"], "batch_size must be >= 1")):
    proc = _tfplace("place", meta_path, "--cluster", "k80x2", "--out",
                    str(out), *sizes)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert out.read_text() == "keep"
  proc = _tfplace("import", "--model", "small_cnn", "--batch_size", "8",
                  "--out", str(tmp_path / "m.meta"))
  assert proc.returncode == 2 and "benchmark model" in proc.stderr
  assert not os.path.exists(tmp_path / "m.meta")
