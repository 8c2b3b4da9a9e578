"""tfplace.apply on a Keras model trained with fit (two logical CPUs)."""

import numpy as np
import pytest

import tfplace  # noqa: F401
import tf_keras

from children import check_training, run_child
from tfplace.apply.keras import import_fit_step
from tfplace.errors import TfplaceError

CPUS = ["/job:localhost/replica:0/task:0/device:CPU:0",
        "/job:localhost/replica:0/task:0/device:CPU:1"]
# The ops of fit's trace that the imported step lacks: its iterator and step
# counter.
FIT_OWN_OPS = {"iterator", "IteratorGetNext", "Const", "AssignAddVariableOp_2",
               "AssignAddVariableOp_2/resource"}


def test_fit_on_two_cpus_matches_unplaced_fit_and_the_placement():
  result = run_child("two_cpu_keras")
  check_training(result, CPUS)
  # Only fit's own ops are not in the imported step: its iterator and step
  # counter; only the import's arguments are not in fit's trace.
  assert set(result["unnamed_ops"]) <= FIT_OWN_OPS
  assert result["missing_ops"] == ["x", "y"]
  # Adam's slots sit with their variable.
  variables = result["variables"]
  for name, device in variables.items():
    if name.startswith(("m/", "v/")):
      assert device == variables[name[2:]], name


def test_fit_with_sample_weights_places_the_weighted_step():
  # With args (x, y, sample_weight) the imported step is the one fit runs
  # with sample weights: its weighted loss's ops are placed too (imported
  # from (x, y), 13 of them were left to TF's placer).
  result = run_child("two_cpu_keras_weighted")
  check_training(result, CPUS)
  assert set(result["unnamed_ops"]) <= FIT_OWN_OPS
  assert sorted(result["missing_ops"]) == ["sample_weight", "x", "y"]


def test_fit_puts_a_lookup_table_where_the_placement_says():
  # A TextVectorization layer's table, placed on the second CPU: TF runs its
  # lookups where the table lives, and the copy's table was made on the
  # first (the lookup ran there: 1 mismatch).
  result = run_child("two_cpu_keras_text")
  check_training(result, CPUS)
  assert result["mismatches"] == []
  assert "table_handle" in result["table_op"]


def test_fit_of_a_layer_that_makes_inner_layers_keeps_their_names():
  # MultiHeadAttention builds its own softmax and dropout layers; the placed
  # copy names them as the model does, so the placement names their ops.
  result = run_child("two_cpu_keras_attention")
  check_training(result, CPUS)
  assert set(result["unnamed_ops"]) <= FIT_OWN_OPS


def _model(compile_model=True):
  model = tf_keras.Sequential([tf_keras.layers.Dense(3, input_shape=(4,),
                                                     name="d")], name="m")
  if compile_model:
    model.compile(optimizer="sgd", loss="mse")
  return model


def test_import_fit_step_names_are_the_fit_trace_names():
  model = _model()
  x, y = np.zeros((5, 4), np.float32), np.zeros((5, 3), np.float32)
  graph = import_fit_step(model, x, y)
  names = {op.name for op in graph.ops}
  assert {"m/d/MatMul", "m/d/BiasAdd", "x", "y", "init"} <= names
  assert any(n.startswith("gradient_tape/m/d/") for n in names)
  assert any(n.startswith("SGD/") for n in names)


def test_an_uncompiled_model_is_a_clear_error():
  with pytest.raises(TfplaceError, match="not compiled"):
    import_fit_step(_model(False), np.zeros((2, 4)), np.zeros((2, 3)))


def test_jit_compile_is_refused():
  model = _model()
  model.compile(optimizer="sgd", loss="mse", jit_compile=True)
  with pytest.raises(TfplaceError, match="jit_compile"):
    import_fit_step(model, np.zeros((2, 4)), np.zeros((2, 3)))
