"""Tests for costing functional control flow (tfplace.graph.control_flow):
real `tf.while_loop` / `tf.cond` training steps, whose loop bodies cost their
ops times the trip count."""

import numpy as np
import pytest

import tfplace  # noqa: F401
import tensorflow as tf

from tfplace import pipeline
from tfplace.cost.analytical import AnalyticalCostModel
from tfplace.cost.presets import cpu_cluster
from tfplace.errors import GraphImportError
from tfplace.graph.importers import from_graph_def, import_graph
from tfplace.graph.op_graph import allocated_bytes
from tfplace.measurement.session import run_training_step

B, H = 4, 16
# One trip of the RNN below: h @ W is [B, H] x [H, H].
MATMUL_FLOPS = 2 * B * H * H


def _rnn_step(trips: int, dynamic: bool = False):
  """A tf.function training step: h = tanh(h @ W + x[t]) for `trips` steps
  (a random number of steps when `dynamic`), loss = sum(h), SGD on W."""
  w = tf.Variable(tf.random.stateless_normal([H, H], seed=(1, 2)) * 0.1)

  @tf.function(input_signature=[tf.TensorSpec([trips, B, H], tf.float32)])
  def step(x):
    with tf.GradientTape() as tape:
      limit = (tf.random.uniform([], 1, trips + 1, dtype=tf.int32)
               if dynamic else trips)
      _, h = tf.while_loop(
          lambda t, h: t < limit,
          lambda t, h: (t + 1, tf.tanh(tf.matmul(h, w) + x[t])),
          [tf.constant(0), tf.zeros([B, H])])
      loss = tf.reduce_sum(h)
    w.assign_sub(0.1 * tape.gradient(loss, w))
    return loss

  return step


def _loops(graph):
  return {op.name: op for op in graph.ops if op.body is not None}


def _rows(op, op_type):
  return [r for r in op.body.ops if r.type == op_type]


def test_static_trip_count_costs_the_body_trips_times():
  g = import_graph(_rnn_step(7))
  loops = _loops(g)
  forward, backward = loops["while"], loops["gradient_tape/while/while_grad"]
  assert forward.body.trip_count == backward.body.trip_count == 7
  assert forward.body.trip_count_source.startswith("static")
  # The backward loop runs as often as the forward loop: its limit is the
  # forward loop's counter.
  assert backward.body.trip_count_source.startswith("static")
  (mm,) = _rows(forward, "MatMul")
  assert (mm.flops, mm.executions) == (MATMUL_FLOPS, 7)
  assert forward.flops >= 7 * MATMUL_FLOPS
  # Backward: two MatMuls per trip (dh and dW).
  assert [(r.flops, r.executions) for r in _rows(backward, "MatMul")] == [
      (MATMUL_FLOPS, 7)] * 2
  # The loop is no longer free: nearly all the step's FLOPs are in it.
  assert forward.flops + backward.flops > 0.9 * g.flops.sum()


def test_accumulators_get_real_bytes():
  g = import_graph(_rnn_step(7))
  forward = _loops(g)["while"]
  sizes = [b for b, d in zip(forward.output_bytes, forward.output_dtypes)
           if d == "variant"]
  # The forward loop keeps tanh outputs and h ([B, H]) and W reads ([H, H])
  # per trip for the backward loop.
  assert sorted(sizes) == sorted([7 * B * H * 4] * 2 + [7 * H * H * 4])
  i = g.index["while"]
  assert g.activation_bytes[i] == sum(
      allocated_bytes(b) for b in forward.output_bytes
  ) + forward.body.working_bytes
  assert forward.body.working_bytes > 0


def test_dynamic_trip_count_is_refused_then_given():
  step = _rnn_step(9, dynamic=True)
  with pytest.raises(GraphImportError) as e:
    import_graph(step)
  message = str(e.value)
  assert "'while' (While)" in message and "loop_trip_counts" in message
  assert "'while': N" in message and "--loop_trip_counts=while=N" in message
  assert "gradient_tape/while/while_grad" in message  # follows from 'while'
  g = import_graph(step, loop_trip_counts={"while": 5})
  loops = _loops(g)
  assert loops["while"].body.trip_count_source == "given"
  assert loops["gradient_tape/while/while_grad"].body.trip_count == 5
  assert np.isfinite(run_training_step(g.graph_def, g.fetches).loss)
  # The given count is recorded in the GraphDef: a re-import needs no option.
  again = from_graph_def(g.graph_def, g.fetches.train_ops, g.fetches.loss,
                         g.fetches.init_ops)
  assert _loops(again)["while"].body.trip_count == 5
  assert _loops(again)["while"].body.trip_count_source == (
      "recorded in the graph")


def test_bad_loop_trip_counts_are_refused():
  step = _rnn_step(3)
  with pytest.raises(GraphImportError, match="'whlie'.*its loops are"):
    import_graph(step, loop_trip_counts={"whlie": 3})
  with pytest.raises(GraphImportError, match="whole number"):
    import_graph(step, loop_trip_counts={"while": -1})


def test_predicted_step_time_scales_with_the_trip_count():
  cluster = cpu_cluster(2)
  times = {}
  for trips in (8, 16, 32):
    g = import_graph(_rnn_step(trips))
    placement = pipeline.place(g, cluster, placer="m_etf")
    times[trips] = placement.metadata.predicted_step_time_s
  # Linear in the trip count: each doubling adds twice the time of the last.
  slope_low = (times[16] - times[8]) / 8
  slope_high = (times[32] - times[16]) / 16
  assert slope_low > 0
  assert slope_high == pytest.approx(slope_low, rel=0.05)
  assert times[32] > 3 * times[8]


def test_body_time_is_the_sum_of_its_ops():
  g = import_graph(_rnn_step(4))
  cluster = cpu_cluster(1)
  model = AnalyticalCostModel()
  costs = model.estimate(g, cluster)
  forward = g.ops[g.index["while"]]
  device = cluster.devices[0]
  eff = model.config.compute_efficiency["CPU"]
  mm = _rows(forward, "MatMul")[0]
  mm_s = max(mm.flops / (device.peak_flops * eff),
             mm.bytes_moved / (device.memory_bandwidth
                               * model.config.memory_efficiency))
  launches = sum(r.executions for r in forward.body.ops) + 1
  assert costs.compute_s[g.index["while"], 0] >= (
      4 * mm_s + launches * device.launch_overhead_s * 0.999)


def test_nested_loops_and_cond_branches():
  w = tf.Variable(tf.ones([8, 8]) * 0.01)

  @tf.function(input_signature=[tf.TensorSpec([4, 8], tf.float32)])
  def step(x):
    with tf.GradientTape() as tape:
      def outer(i, h):
        _, h = tf.while_loop(lambda j, h: j < 3,
                             lambda j, h: (j + 1, tf.matmul(h, w)), [0, h])
        h = tf.cond(tf.reduce_sum(h) > 0.0,
                    lambda: tf.nn.relu(tf.matmul(h, w)), lambda: h * 2.0)
        return i + 1, h
      _, h = tf.while_loop(lambda i, h: i < 5, outer, [0, x])
      loss = tf.reduce_mean(h)
    w.assign_sub(0.01 * tape.gradient(loss, w))
    return loss

  g = import_graph(step)
  loops = _loops(g)
  forward, backward = loops["while"], loops["gradient_tape/while/while_grad"]
  assert forward.body.trip_count == backward.body.trip_count == 5
  mm = 2 * 4 * 8 * 8
  # Inner loop: 3 MatMuls per outer trip; the If costs its dearer branch
  # (relu(h @ w), not h * 2): one MatMul per outer trip.
  assert sorted(r.executions for r in _rows(forward, "MatMul")) == [5, 15]
  assert all(r.flops == mm for r in _rows(forward, "MatMul"))
  # The nested gradient loop finds its trip count (3) and element shapes
  # through the TensorLists of the outer loops.
  back = sorted((r.executions, r.flops) for r in _rows(backward, "MatMul"))
  assert back == [(5, mm), (5, mm), (15, mm), (15, mm)]
  assert np.isfinite(run_training_step(g.graph_def, g.fetches).loss)


def test_keras_lstm_loop_is_static():
  import tf_keras
  model = tf_keras.Sequential([tf_keras.layers.LSTM(8, input_shape=(6, 3)),
                               tf_keras.layers.Dense(1)])
  g = import_graph(model, loss="mse", batch_size=4)
  trips = {op.body.trip_count for op in _loops(g).values()}
  assert trips == {6}


def test_known_dimension_of_a_partly_known_shape_is_a_static_limit():
  # Keras's RNNs loop while t < tf.shape(inputs)[0] on [steps, None, ...]
  # inputs (fit's step, fed by an iterator): the known dimension is static.
  w = tf.Variable(1.0)

  def step_for(dim):
    @tf.function(input_signature=[])
    def step():
      rows = tf.random.uniform([], 1, 5, dtype=tf.int32)
      x = tf.random.uniform(tf.stack([rows, 7]))  # Static shape [None, 7].
      limit = tf.shape(x)[dim]
      with tf.GradientTape() as tape:
        _, s = tf.while_loop(lambda i, s: i < limit,
                             lambda i, s: (i + 1, s + w * x[0, i % 7]),
                             [tf.constant(0), tf.constant(0.0)])
      w.assign_sub(0.01 * tape.gradient(s, w))
      return s
    return step

  g = import_graph(step_for(1))
  assert {op.body.trip_count for op in _loops(g).values()} == {7}
  assert np.isfinite(run_training_step(g.graph_def, g.fetches).loss)
  with pytest.raises(GraphImportError, match="loop_trip_counts"):
    import_graph(step_for(0))  # The unknown dimension stays unknown.


def test_stacked_keras_rnn_in_fit_step_has_static_loops():
  # In fit's step the batch is unknown and an RNN's output length is a
  # tensor: the second LSTM's loop limit, tf.shape(inputs)[0], used to be
  # refused as not static; the first loop's stacked outputs tell it.
  import tf_keras
  inputs = tf_keras.Input((6,), dtype="int32")
  hidden = tf_keras.layers.Embedding(50, 4)(inputs)
  hidden = tf_keras.layers.Bidirectional(
      tf_keras.layers.LSTM(5, return_sequences=True))(hidden)
  model = tf_keras.Model(inputs, tf_keras.layers.LSTM(3)(hidden))
  model.compile(optimizer="sgd", loss="mse")
  x = np.random.RandomState(0).randint(0, 50, size=(4, 6)).astype(np.int32)
  g = tfplace.apply.import_fit_step(model, x, np.zeros((4, 3), np.float32))
  loops = _loops(g)
  assert len(loops) == 6  # Three LSTMs, each with its gradient loop.
  assert {op.body.trip_count for op in loops.values()} == {6}


def test_maximum_iterations_bounds_the_count():
  @tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
  def capped(x):
    _, y = tf.while_loop(lambda i, y: i < 100, lambda i, y: (i + 1, y * 1.5),
                         [0, x], maximum_iterations=4)
    return tf.reduce_sum(y)

  g = import_graph(capped)
  assert _loops(g)["while"].body.trip_count == 4

  @tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
  def until(x):  # Data-dependent: at most 4 trips, not a static count.
    return tf.reduce_sum(tf.while_loop(
        lambda y: tf.reduce_sum(y) < 10.0, lambda y: y * 1.5, [x],
        maximum_iterations=4)[0])

  with pytest.raises(GraphImportError, match="loop_trip_counts"):
    import_graph(until)
  assert _loops(import_graph(until, loop_trip_counts={"while": 2}))[
      "while"].body.trip_count == 2


@pytest.mark.parametrize("cmp,init,step,limit,trips", [
    ("Less", 0, 1, 7, 7), ("Less", 0, 3, 7, 3), ("LessEqual", 0, 1, 7, 8),
    ("Greater", 10, -2, 0, 5), ("GreaterEqual", 10, -2, 0, 6),
    ("NotEqual", 0, 2, 8, 4), ("Less", 5, 1, 3, 0), ("Less", 0, -1, 3, None),
    ("NotEqual", 0, 2, 7, None),
])
def test_count(cmp, init, step, limit, trips):
  from tfplace.graph.trip_counts import Induction, count
  assert count(cmp, Induction(init, step), limit) == trips



def test_grappler_model_keeps_the_body_costs():
  from tfplace.cost.grappler_costs import GrapplerCostModel
  g = import_graph(_rnn_step(6))
  cluster = cpu_cluster(1)
  grappler = GrapplerCostModel().estimate(g, cluster).compute_s
  analytical = AnalyticalCostModel().estimate(g, cluster).compute_s
  for name in ("while", "gradient_tape/while/while_grad"):
    i = g.index[name]
    assert grappler[i, 0] == analytical[i, 0] > 6 * 2 * 1e-6


def _frame_rows(op):
  return {r.type: r.executions for r in op.body.ops
          if r.name.endswith("(loop frame)")}


def test_a_loop_variable_nothing_reads_is_not_costed():
  # TensorFlow prunes a loop variable whose output nothing reads, with the
  # body ops that only feed it (the accumulators a gradient loop does not
  # read): a loop with a used and an unused variable costs the used one's
  # ops and frame alone.
  trips = 5

  @tf.function(input_signature=[tf.TensorSpec([B, H], tf.float32)])
  def step(x):
    _, used, _ = tf.while_loop(
        lambda t, a, b: t < trips,
        lambda t, a, b: (t + 1, tf.tanh(a), tf.matmul(b, b)),
        [tf.constant(0), x, tf.eye(H)])
    return tf.reduce_sum(used)

  (loop,) = _loops(import_graph(step)).values()
  assert loop.body.trip_count == trips
  assert {r.type for r in loop.body.ops} >= {"Tanh", "AddV2", "Merge"}
  assert "MatMul" not in {r.type for r in loop.body.ops}
  # Two variables run: the counter (the condition reads it) and the used
  # one.
  frame = _frame_rows(loop)
  assert frame["Merge"] == 2 * (trips + 1)
  assert frame["NextIteration"] == 2 * trips and frame["Enter"] == 2


def test_a_loop_variable_a_kept_one_needs_is_costed():
  # The unread variable feeds the read one's update: both run.
  trips = 4

  @tf.function(input_signature=[tf.TensorSpec([B, H], tf.float32)])
  def step(x):
    _, used, _ = tf.while_loop(
        lambda t, a, b: t < trips,
        lambda t, a, b: (t + 1, tf.tanh(a + tf.reduce_sum(b)),
                         tf.matmul(b, b)),
        [tf.constant(0), x, tf.eye(H)])
    return tf.reduce_sum(used)

  (loop,) = _loops(import_graph(step)).values()
  assert [r.executions for r in _rows(loop, "MatMul")] == [trips]
  assert _frame_rows(loop)["Merge"] == 3 * (trips + 1)
