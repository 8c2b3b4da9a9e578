"""Tests for tfplace.graph.importers_keras on a tiny tf_keras model."""

import numpy as np
import pytest

import tfplace  # noqa: F401
import tf_keras

from tfplace.measurement.session import run_training_step
from tfplace.errors import GraphImportError
from tfplace.graph.importers import import_graph


def _model(dropout=0.0):
  layers = [tf_keras.layers.Dense(4, activation="relu", input_shape=(3,))]
  if dropout:
    layers.append(tf_keras.layers.Dropout(dropout))
  layers.append(tf_keras.layers.Dense(2, activation="softmax"))
  return tf_keras.Sequential(layers)


def test_keras_step_loss_matches_eager_and_model_still_works():
  model = _model()
  x = np.random.RandomState(1).randn(5, 3).astype(np.float32)
  y = np.array([0, 1, 1, 0, 1])
  g = import_graph(model, loss="sparse_categorical_crossentropy",
                   optimizer=tf_keras.optimizers.SGD(0.1), x=x, y=y)
  assert g.fetches.train_ops == ("train",) and g.fetches.loss == "loss:0"
  # Two kernels and two biases: (3*4 + 4 + 4*2 + 2) floats.
  assert g.param_bytes.sum() >= (12 + 4 + 8 + 2) * 4
  eager = tf_keras.losses.sparse_categorical_crossentropy(y, model(x))
  run = run_training_step(g.graph_def, g.fetches)
  assert run.loss == pytest.approx(float(np.mean(eager)), rel=1e-5)


def test_keras_random_data_and_dropout_are_deterministic():
  g = import_graph(_model(dropout=0.5), loss="mse", optimizer="adam",
                   batch_size=8)
  assert g.op("x").output_shapes == ((8, 3),)
  losses = {run_training_step(g.graph_def, g.fetches).loss for _ in range(2)}
  assert len(losses) == 1


def test_keras_needs_a_loss_and_a_known_optimizer():
  with pytest.raises(GraphImportError, match="loss"):
    import_graph(_model())
  with pytest.raises(GraphImportError, match="unknown optimizer"):
    import_graph(_model(), loss="mse", optimizer="nosuch")


def test_functional_conv_batchnorm_model_runs_with_its_updates():
  inputs = tf_keras.Input((6, 6, 2))
  h = tf_keras.layers.Conv2D(3, 3, activation="relu")(inputs)
  h = tf_keras.layers.BatchNormalization()(h)
  h = tf_keras.layers.Flatten()(tf_keras.layers.MaxPooling2D()(h))
  model = tf_keras.Model(inputs, tf_keras.layers.Dense(4, "softmax")(h))
  g = import_graph(model, loss="categorical_crossentropy",
                   optimizer=tf_keras.optimizers.RMSprop(0.01), batch_size=2)
  # Conv2D on the batch of 2: 2x4x4x3 outputs, each 3*3*2 multiply-adds.
  conv = [op for op in g.ops if op.type == "Conv2D"
          and op.output_shapes[0][0] == 2]
  assert len(conv) == 1 and conv[0].flops == 2 * (2 * 4 * 4 * 3) * 18
  assert "Conv2DBackpropFilter" in g.op_types
  # The moving-average updates of the training call run in the step.
  assert any("AssignMovingAvg" in op.name for op in g.ops)
  assert run_training_step(g.graph_def, g.fetches, steps=2).loss > 0


@pytest.mark.parametrize("loss, label_shape, label_dtype", [
    (tf_keras.losses.SparseCategoricalCrossentropy(), (8,), "int32"),
    ("sparse_categorical_crossentropy", (8,), "int32"),
    (tf_keras.losses.CategoricalCrossentropy(), (8, 2), "float32"),
    (tf_keras.losses.MeanSquaredError(), (8, 2), "float32"),
])
def test_random_labels_fit_the_loss_in_either_form(loss, label_shape,
                                                   label_dtype):
  g = import_graph(_model(), loss=loss, optimizer="sgd", batch_size=8)
  assert g.op("y").output_shapes == (label_shape,)
  assert g.op("y").output_dtypes == (label_dtype,)
  assert np.isfinite(run_training_step(g.graph_def, g.fetches).loss)
