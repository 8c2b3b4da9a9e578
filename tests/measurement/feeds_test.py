"""Tests for inputs from outside the graph: synthetic and user feeds for
placeholders, tf.data iterators and queues, measured on 2 local TF servers."""

import math

import numpy as np
import pytest

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.errors import FeedError, MeasureError
from tfplace.measurement import feeds
from tfplace.measurement.config import MeasureConfig
from tfplace.measurement.feeds import FeedOptions, resolve_inputs
from tfplace.measurement.local_cluster import LocalCluster
from tfplace.measurement.runner import measure
from tfplace.placement import Placement

import input_graphs
from input_graphs import CLASSES, VOCAB

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"


@pytest.fixture(scope="module")
def servers():
  with LocalCluster(num_workers=2) as lc:
    yield lc


@pytest.fixture(scope="module")
def placeholder_graph(tmp_path_factory):
  return input_graphs.placeholder_graph(
      str(tmp_path_factory.mktemp("g") / "placeholders.meta"))


def _by_name(sources):
  return {s.name: s for s in sources}


def _check_run(timing, placement, servers):
  assert timing.loss is not None and math.isfinite(timing.loss)
  assert timing.devices_match, timing.mismatches[:3]
  used = {r.device for r in timing.op_records}
  assert used == set(placement.devices.values()) == set(
      servers.to_cluster().device_names)


def test_synthetic_feeds_on_two_workers(placeholder_graph, servers):
  g = placeholder_graph
  inputs = resolve_inputs(g, options=FeedOptions(batch_size=8))
  values = inputs.values
  # ids index the 50-row table, labels the 5 classes: drawn in range.
  assert values["ids:0"].shape == (8, 4) and values["ids:0"].dtype == np.int32
  assert 0 <= values["ids:0"].min() and values["ids:0"].max() < VOCAB
  assert values["labels:0"].shape == (8,)
  assert 0 <= values["labels:0"].min() and values["labels:0"].max() < CLASSES
  assert values["x:0"].shape == (8, 6) and values["x:0"].dtype == np.float32
  placement = input_graphs.by_group(g)
  timing = measure(g, placement, MeasureConfig(
      target=servers.target, warmup=1, steps=3, timeout_s=60),
                   feed_options=FeedOptions(batch_size=8))
  _check_run(timing, placement, servers)
  sources = _by_name(timing.inputs)
  assert {s.source for s in sources.values()} == {"synthetic"}
  assert "[0, 50)" in sources["ids"].how and "'emb'" in sources["ids"].how
  assert "[0, 5)" in sources["labels"].how
  assert sources["labels"].shape == (8,)
  assert sources["x"].how == "standard normal values"


def test_user_feeds_and_input_function_on_two_workers(placeholder_graph,
                                                      servers, tmp_path):
  g = placeholder_graph
  rng = np.random.default_rng(1)
  arrays = {"ids": rng.integers(0, VOCAB, (3, 4)).astype(np.int32),
            "labels:0": np.array([0, 4, 2], np.int32),
            "x": rng.standard_normal((3, 6)).astype(np.float32)}
  path = str(tmp_path / "feeds.npz")
  np.savez(path, **{k.split(":")[0]: v for k, v in arrays.items()})
  placement = input_graphs.by_group(g)
  config = MeasureConfig(target=servers.target, warmup=1, steps=2,
                         timeout_s=60)
  timing = measure(g, placement, config, feeds=feeds.load_feeds(path))
  _check_run(timing, placement, servers)
  assert {s.name: (s.source, s.shape) for s in timing.inputs} == {
      "ids": ("user", (3, 4)), "labels": ("user", (3,)),
      "x": ("user", (3, 6))}
  # An input function is called once per run (init, 1 warmup, 2 timed, 1
  # traced); what it does not give (x) is synthesized with the batch size.
  calls = []

  def input_fn(run):
    calls.append(run)
    return {"ids": arrays["ids"][:2], "labels": arrays["labels:0"][:2]}

  timing = measure(g, placement, config, feeds=input_fn,
                   feed_options=FeedOptions(batch_size=2))
  _check_run(timing, placement, servers)
  assert calls == [0, 0, 1, 2, 3, 4]  # resolve_inputs checks run 0 first
  assert _by_name(timing.inputs)["x"].source == "synthetic"


def test_tf_data_iterator_on_two_workers(servers, tmp_path):
  g = input_graphs.dataset_graph(str(tmp_path / "data.meta"))
  placement = input_graphs.by_group(g)
  timing = measure(g, placement, MeasureConfig(
      target=servers.target, warmup=0, steps=3, timeout_s=60))
  _check_run(timing, placement, servers)
  assert [(s.name, s.source) for s in timing.inputs] == [
      ("IteratorV2", "pipeline")]
  assert "MakeIterator" in timing.inputs[0].how


def test_queue_on_two_workers(servers, tmp_path):
  g = input_graphs.queue_graph(str(tmp_path / "queue.meta"))
  placement = input_graphs.by_group(g)
  timing = measure(g, placement, MeasureConfig(
      target=servers.target, warmup=0, steps=3, timeout_s=60))
  _check_run(timing, placement, servers)
  assert [(s.name, s.source) for s in timing.inputs] == [("queue", "pipeline")]


def test_exhausted_dataset_is_a_clear_error(tmp_path):
  g = input_graphs.dataset_graph(str(tmp_path / "d.meta"), repeat=False)
  inputs = resolve_inputs(g)
  assert inputs.fill_step and inputs.pipelines.init_ops == ("MakeIterator",)
  placement = Placement({op.name: CPU0 for op in g.ops})
  # 5 batches: 1 fill step + 4 timed steps fit, a 5th timed step does not.
  assert len(measure(g, placement, MeasureConfig(warmup=0, steps=3))
             .step_times_s) == 3
  with pytest.raises(MeasureError, match="ran out of data.*dataset.repeat"):
    measure(g, placement, MeasureConfig(warmup=0, steps=5))


def test_unknown_batch_dimension_needs_an_option(placeholder_graph):
  with pytest.raises(FeedError, match=r"'ids'.*unknown dimension 0.*"
                     r"--batch_size.*--input_shapes ids="):
    resolve_inputs(placeholder_graph)
  inputs = resolve_inputs(placeholder_graph, options=FeedOptions(
      batch_size=8, input_shapes={"ids": (2, 4)}))
  assert inputs.values["ids:0"].shape == (2, 4)
  assert inputs.values["x:0"].shape == (8, 6)
  with pytest.raises(FeedError, match="does not fit"):
    resolve_inputs(placeholder_graph, options=FeedOptions(
        batch_size=8, input_shapes={"ids": (2, 5)}))


def test_bad_user_feeds_are_clear_errors(placeholder_graph):
  g = placeholder_graph
  options = FeedOptions(batch_size=2)
  good = np.zeros((2, 6), np.float32)
  with pytest.raises(FeedError, match="dtype float64.*takes float32"):
    resolve_inputs(g, {"x": good.astype(np.float64)}, options)
  with pytest.raises(FeedError, match=r"shape \[2, 5\].*\[\?, 6\]"):
    resolve_inputs(g, {"x": np.zeros((2, 5), np.float32)}, options)
  with pytest.raises(FeedError, match="'MatMul' is a MatMul op, not a "
                     "placeholder"):
    resolve_inputs(g, {"MatMul": good}, options)
  with pytest.raises(FeedError, match="no op 'nope'"):
    resolve_inputs(g, {"nope": good}, options)
  with pytest.raises(FeedError, match="index_ranges names"):
    resolve_inputs(g, None, FeedOptions(batch_size=2,
                                        index_ranges={"emb": 3}))
  assert resolve_inputs(g, {"x": good}, options).values["x:0"] is not None


def test_values_that_cannot_be_made_up(tmp_path):
  import tensorflow as tf
  from tfplace.graph.importers import import_graph
  graph = tf.Graph()
  with graph.as_default():
    words = tf.compat.v1.placeholder(tf.string, [2], name="words")
    tf.strings.length(words, name="length")
  g = import_graph(graph.as_graph_def(), train_ops=["length"])
  with pytest.raises(FeedError, match="'words' has dtype string.*--feeds"):
    resolve_inputs(g)
  inputs = resolve_inputs(g, {"words": np.array([b"a", b"bc"])})
  assert inputs.kinds == ("user",)


def test_index_ranges_from_one_hot_and_gather_axis():
  import tensorflow as tf
  from tfplace.graph.importers import import_graph
  from tfplace.measurement.graph_inputs import index_bound
  graph = tf.Graph()
  with graph.as_default():
    cls = tf.compat.v1.placeholder(tf.int64, [3], name="cls")
    col = tf.compat.v1.placeholder(tf.int32, [2], name="col")
    free = tf.compat.v1.placeholder(tf.int32, [2], name="free")
    table = tf.ones([4, 7])
    total = (tf.reduce_sum(tf.one_hot(tf.identity(cls), 6))
             + tf.reduce_sum(tf.gather(table, col, axis=1))
             + tf.cast(tf.reduce_sum(free), tf.float32))
    tf.identity(total, name="loss")
  assert index_bound(graph, "cls")[0] == 6
  assert index_bound(graph, "col")[0] == 7
  assert index_bound(graph, "free") == (None, "")
  g = import_graph(graph.as_graph_def(), train_ops=["loss"])
  values = resolve_inputs(g, options=FeedOptions(
      index_ranges={"free": 3})).values
  assert values["cls:0"].max() < 6 and values["col:0"].max() < 7
  assert values["free:0"].max() < 3


def test_npz_files_and_option_strings(tmp_path):
  np.savez(tmp_path / "ok.npz", a=np.arange(3))
  assert list(feeds.load_feeds(str(tmp_path / "ok.npz"))) == ["a"]
  (tmp_path / "text.npz").write_text("not a zip")
  np.save(tmp_path / "one.npy", np.arange(3))
  for name, message in (("text.npz", "not an .npz file"),
                        ("one.npy", "holds one array"),
                        ("missing.npz", "no such feeds file")):
    with pytest.raises(FeedError, match=message):
      feeds.load_feeds(str(tmp_path / name))
  assert feeds.parse_index_ranges(["labels=10"]) == {"labels": 10}
  with pytest.raises(FeedError, match="--index_ranges"):
    feeds.parse_index_ranges(["labels=0"])


def test_feeding_a_tf_function_argument_says_to_give_it_at_import():
  # "'x' is a Const op, not a placeholder" left a tf.function user with no
  # way forward: its arguments are constants of the imported step.
  import tensorflow as tf
  w = tf.Variable(tf.ones([3, 2]))

  @tf.function(input_signature=[tf.TensorSpec([4, 3], tf.float32)])
  def step(x):
    w.assign_sub(0.1 * tf.ones([3, 2]))
    return tf.reduce_sum(x @ w)

  g = tfplace.import_graph(step)
  with pytest.raises(FeedError, match=r"'x' is a Const op, not a placeholder;"
                     r" .*import_graph\(fn, args=\.\.\.\)"):
    resolve_inputs(g, {"x": np.zeros((4, 3), np.float32)})
