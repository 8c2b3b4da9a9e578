"""Tests for tfplace.models.lstm_cell: one step by hand, unrolling order."""

import math

import tfplace  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TF)
import numpy as np
import tensorflow as tf

from tfplace.models import lstm_cell

_V1 = tf.compat.v1


def _run(fetches, graph):
  with _V1.Session(graph=graph) as session:
    session.run(_V1.global_variables_initializer())
    return session.run(fetches)


def test_step_with_zero_weights_matches_hand_values():
  # z = 0: i = o = sigmoid(0) = 0.5, f = sigmoid(0 + 1), j = tanh(0) = 0.
  graph = tf.Graph()
  with graph.as_default():
    params = lstm_cell.LstmParams(kernel=tf.zeros([3 + 2, 8]),
                                  bias=tf.zeros([8]), hidden=2)
    h, c = lstm_cell.lstm_step(params, tf.ones([1, 3]), tf.zeros([1, 2]),
                               tf.ones([1, 2]))
  h_val, c_val = _run([h, c], graph)
  c_hand = 1.0 / (1.0 + math.exp(-1.0))  # 0.7311
  np.testing.assert_allclose(c_val, [[c_hand, c_hand]], rtol=1e-6)
  np.testing.assert_allclose(h_val, [[0.5 * math.tanh(c_hand)] * 2],
                             rtol=1e-6)


def test_bias_on_candidate_gate_enters_cell():
  # Bias only on j (gate order i, j, f, o): c = 0.5 * tanh(2), h = 0.5 tanh(c).
  graph = tf.Graph()
  with graph.as_default():
    bias = tf.constant([0.0, 2.0, 0.0, 0.0])
    params = lstm_cell.LstmParams(kernel=tf.zeros([2, 4]), bias=bias,
                                  hidden=1)
    h, c = lstm_cell.lstm_step(params, tf.zeros([1, 1]), tf.zeros([1, 1]),
                               tf.zeros([1, 1]))
  h_val, c_val = _run([h, c], graph)
  assert abs(c_val[0, 0] - 0.5 * math.tanh(2.0)) < 1e-6
  assert abs(h_val[0, 0] - 0.5 * math.tanh(0.5 * math.tanh(2.0))) < 1e-6


def test_unrolled_layer_creates_one_step_scope_per_input_and_no_loop():
  graph = tf.Graph()
  with graph.as_default():
    inputs = [tf.ones([2, 3]) * t for t in range(4)]
    outputs = lstm_cell.unrolled_layer("lstm_0", inputs, 5, 0.1, reverse=True)
  names = {op.name for op in graph.get_operations()}
  assert len(outputs) == 4
  assert all(f"lstm_0/t_{t}/MatMul" in names for t in range(4))
  assert "lstm_0/kernel" in names and "lstm_0/bias" in names
  assert not {op.type for op in graph.get_operations()} & {"While", "Enter"}
  # Reversed: step 3 starts from the zero state, step 0 reads step 1's h;
  # outputs stay in input order.
  first = graph.get_operation_by_name("lstm_0/t_3/concat")
  last = graph.get_operation_by_name("lstm_0/t_0/concat")
  assert first.inputs[1].op.name == "lstm_0/zero_state"
  assert last.inputs[1].op.name.startswith("lstm_0/t_1/")
  assert outputs[3].op.name.startswith("lstm_0/t_3/")
  assert outputs[0].op.name.startswith("lstm_0/t_0/")


def test_residual_adds_the_input():
  graph = tf.Graph()
  with graph.as_default():
    with _V1.variable_scope("r", initializer=_V1.zeros_initializer()):
      inputs = [tf.fill([1, 2], 3.0)]
      out = lstm_cell.unrolled_layer("layer", inputs, 2, 0.0, residual=True)
  # init_scale 0 gives zero weights: h = 0.5 * tanh(0.5 * tanh(0)) = 0.
  np.testing.assert_allclose(_run(out[0], graph), [[3.0, 3.0]], atol=1e-6)
