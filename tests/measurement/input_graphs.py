"""Small TF1 training graphs that take their inputs from outside, exported
as a user would (`tf.compat.v1.train.export_meta_graph`), for the feed and
input pipeline tests."""

import numpy as np

import tfplace  # noqa: F401  (before TensorFlow)
import tensorflow as tf

from tfplace.graph.importers import import_graph
from tfplace.measurement.local_cluster import worker_device
from tfplace.placement import Placement

V1 = tf.compat.v1
VOCAB, CLASSES = 50, 5


def _train(loss):
  V1.add_to_collection(V1.GraphKeys.LOSSES, loss)
  V1.train.GradientDescentOptimizer(0.1).minimize(loss, name="train_op")
  V1.global_variables_initializer()


def _export(graph, path):
  with graph.as_default():
    V1.train.export_meta_graph(filename=path)
  return import_graph(path)


def placeholder_graph(path):
  """ids int32 [?, 4] into a 50-row embedding, x float32 [?, 6] into a
  dense layer, labels int32 [?] into a 5-class sparse softmax; the batch
  dimension is unknown."""
  graph = tf.Graph()
  with graph.as_default():
    ids = V1.placeholder(tf.int32, [None, 4], name="ids")
    x = V1.placeholder(tf.float32, [None, 6], name="x")
    labels = V1.placeholder(tf.int32, [None], name="labels")
    table = V1.get_variable("emb", [VOCAB, 8], use_resource=True)
    w = V1.get_variable("w", [6, 8], use_resource=True)
    out = V1.get_variable("out", [8, CLASSES], use_resource=True)
    hidden = tf.nn.relu(tf.reduce_mean(tf.nn.embedding_lookup(table, ids),
                                       axis=1) + tf.matmul(x, w))
    xent = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=tf.matmul(hidden, out))
    _train(tf.reduce_mean(xent, name="loss"))
  return _export(graph, path)


def dataset_graph(path, repeat=True):
  """An initializable tf.data iterator over 20 rows in batches of 4 (5
  batches; repeated unless `repeat` is False) into a softmax layer."""
  graph = tf.Graph()
  with graph.as_default():
    rows = np.random.RandomState(0).randn(20, 6).astype(np.float32)
    data = tf.data.Dataset.from_tensor_slices(
        (rows, np.arange(20, dtype=np.int32) % CLASSES)).batch(4)
    if repeat:
      data = data.repeat()
    x, labels = V1.data.make_initializable_iterator(data).get_next()
    _train(_softmax_loss(x, labels))
  return _export(graph, path)


def queue_graph(path):
  """A FIFO queue filled with random rows by one enqueue op, dequeued 4 at
  a time into a softmax layer."""
  graph = tf.Graph()
  with graph.as_default():
    queue = V1.FIFOQueue(16, [tf.float32, tf.int32], shapes=[[6], []],
                         name="queue")
    queue.enqueue([tf.random.normal([6]),
                   tf.random.uniform([], 0, CLASSES, tf.int32)],
                  name="enqueue")
    x, labels = queue.dequeue_many(4)
    _train(_softmax_loss(x, labels))
  return _export(graph, path)


def _softmax_loss(x, labels):
  w = V1.get_variable("w", [6, CLASSES], use_resource=True)
  xent = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=tf.matmul(x, w))
  return tf.reduce_mean(xent, name="loss")


def by_group(graph, num_tasks=2):
  """Colocation group g on worker task (g mod num_tasks)."""
  return Placement({op.name: worker_device(int(graph.group_of[i]) % num_tasks)
                    for i, op in enumerate(graph.ops)})
