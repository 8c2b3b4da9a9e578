"""A training step's loss found where nobody named it."""

import logging
import os

import numpy as np

import tfplace  # noqa: F401
import tensorflow as tf

from tfplace.graph.importers import import_graph

SMALL = os.path.join(os.path.dirname(__file__), "..", "..", "testdata",
                     "matmul_relu_sum.pbtxt")
tf1 = tf.compat.v1


def _tf1_meta(path, losses=1):
  """A TF1 classifier fed by placeholders, its loss an unnamed mean in a
  name scope (no "losses" collection), trained by `minimize`; with
  `losses=2`, two such losses, each minimized."""
  graph = tf.Graph()
  with graph.as_default():
    x = tf1.placeholder(tf.float32, [None, 8], name="x")
    y = tf1.placeholder(tf.int32, [None], name="y")
    for k in range(losses):
      w = tf1.get_variable(f"w{k}", [8, 4])
      with tf.name_scope("model"):
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=y, logits=tf.matmul(x, w)))
      tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
    tf1.global_variables_initializer()
    tf1.train.export_meta_graph(path, graph=graph)
  assert "losses" not in graph.get_all_collection_keys()


def test_the_loss_the_gradients_start_from_is_the_steps(tmp_path, caplog):
  # fetches.loss was None, and the README's TF1 snippet failed in
  # sess.run: "Fetch argument None has invalid type".
  path = str(tmp_path / "model.meta")
  _tf1_meta(path)
  with caplog.at_level(logging.WARNING):
    graph = import_graph(path, batch_size=16)
  assert graph.fetches.loss == "model/Mean:0"
  assert "no loss found" not in caplog.text
  rng = np.random.RandomState(0)
  feeds = {"x:0": rng.rand(16, 8).astype("float32"),
           "y:0": rng.randint(0, 4, size=16)}
  with tf.Graph().as_default():
    tf1.import_graph_def(graph.graph_def, name="")
    with tf1.Session() as sess:
      sess.run(list(graph.fetches.init_ops))
      losses = [sess.run([graph.fetches.loss, *graph.fetches.train_ops],
                         feeds)[0] for _ in range(3)]
  assert np.all(np.isfinite(losses)) and losses[2] < losses[0]


def test_gradients_of_several_losses_are_named_in_a_warning(tmp_path,
                                                            caplog):
  path = str(tmp_path / "two.meta")
  _tf1_meta(path, losses=2)
  with caplog.at_level(logging.WARNING):
    graph = import_graph(path, batch_size=16)
  assert graph.fetches.loss is None
  assert ("no loss found (no \"losses\" collection, no scalar float op named "
          "...loss, the gradients start from 2: model/Mean, model_1/Mean): "
          "fetches.loss is None; give loss=\"NAME:0\" to import_graph"
          in caplog.text)


def test_a_graph_without_gradients_has_no_loss_to_warn_about(caplog):
  with caplog.at_level(logging.WARNING):
    graph = import_graph(SMALL)
  assert graph.fetches.loss is None and graph.fetches.train_ops == ("sum",)
  assert "no loss found" not in caplog.text
