"""Tests for the Keras-built benchmark models (tfplace.models.keras_models)."""

import math

import tfplace  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TF)
import pytest

from tfplace.errors import GraphImportError
from tfplace.models import common, registry

SMALL = {
    "mobilenet_v2": dict(batch_size=2, image_size=32, num_classes=3),
    "keras_lstm": dict(batch_size=2, seq_len=5, vocab=30, embedding=4,
                       hidden=6, num_classes=3),
    "keras_transformer": dict(batch_size=2, seq_len=4, vocab=30, dim=8,
                              heads=2, feed_forward=6, layers=2,
                              num_classes=3),
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_steps_are_finite_deterministic_and_import(name):
  built = registry.build_tf_graph(name, **SMALL[name])
  losses = common.run_steps(built, num_steps=2)
  assert all(math.isfinite(x) for x in losses) and losses[1] != losses[0]
  again = registry.build_tf_graph(name, **SMALL[name])
  assert losses == common.run_steps(again, num_steps=2)
  graph = registry.build_model(name, **SMALL[name])
  assert graph.fingerprint == registry.build_model(name,
                                                   **SMALL[name]).fingerprint
  assert graph.fetches.train_ops == ("train",)
  assert graph.fetches.loss == "loss:0"


def test_mobilenet_has_depthwise_convolutions_and_relu6():
  types = {op.type for op in registry.build_model(
      "mobilenet_v2", **SMALL["mobilenet_v2"]).ops}
  assert {"DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput",
          "DepthwiseConv2dNativeBackpropFilter", "Relu6",
          "Relu6Grad", "FusedBatchNormGradV3"} <= types


def test_keras_lstm_is_a_loop_of_seq_len_trips_and_its_gradient():
  graph = registry.build_model("keras_lstm", **SMALL["keras_lstm"])
  loops = [op for op in graph.ops if op.is_control_flow]
  assert len(loops) == 2
  assert all(op.body.trip_count == 5 for op in loops)
  assert all(any(b.type == "MatMul" for b in op.body.ops) for op in loops)
  # Each loop shares its group with every op it exchanges tensors with
  # (graph/colocation.py: TF runs a loop split from them trip by trip).
  index = {op.name: i for i, op in enumerate(graph.ops)}
  for op in loops:
    i = index[op.name]
    neighbours = {e.dst if e.src == i else e.src for e in graph.edges
                  if not e.is_control and i in (e.src, e.dst)}
    assert neighbours and all(graph.group_of[n] == graph.group_of[i]
                              for n in neighbours)


def test_keras_transformer_attends_with_einsums_in_every_layer():
  graph = registry.build_model("keras_transformer",
                               **SMALL["keras_transformer"])
  einsums = [op for op in graph.ops if op.type == "Einsum"]
  # Per layer: 4 projections and 2 score/context products forward, two
  # gradients each backward.
  assert len(einsums) == 2 * 6 * 3
  assert {next(p for p in op.name.split("/") if p.startswith("attention_"))
          for op in einsums} == {"attention_0", "attention_1"}
  assert all(op.flops > 0 for op in einsums)
  types = {op.type for op in graph.ops}
  assert {"Softmax", "Erfc", "FusedBatchNormV3"} <= types
  # The calibration's variants: scores and context batched, layer norms
  # channels-first (as the suite's calib_attention).
  assert sum(op.variant == "batched" for op in einsums) == 2 * 6
  # Each batched one runs a product per sequence and head; the rest one.
  assert sorted({op.matrix_products for op in einsums}) == [1, 2 * 2]
  assert all((op.matrix_products > 1) == (op.variant == "batched")
             for op in einsums)
  assert {op.variant for op in graph.ops
          if op.type.startswith("FusedBatchNorm")} == {"channels_first"}
  # TF's kernel copies the scores' key, query and product into another
  # order (its transposes are costed); the projections run as they are.
  scores = [op for op in einsums if op.name.endswith("attention_0/einsum/"
                                                     "Einsum")]
  assert len(scores) == 1 and scores[0].copy_bytes > 0
  assert all(op.copy_bytes == 0 for op in einsums
             if "/query/" in op.name and "grad" not in op.name)


def test_bad_sizes_are_clear_errors():
  with pytest.raises(GraphImportError, match="image_size must be >= 32"):
    registry.build_tf_graph("mobilenet_v2", image_size=16)
  with pytest.raises(GraphImportError, match="hidden"):
    registry.build_tf_graph("keras_lstm", hidden=0)
  with pytest.raises(GraphImportError, match="multiple of heads"):
    registry.build_tf_graph("keras_transformer", dim=10, heads=4)
