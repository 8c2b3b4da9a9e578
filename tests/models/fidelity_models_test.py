"""Tests for the held-out fidelity graphs (resnet_like, transformer,
random_dag) and the calibration suite's graphs."""

import collections
import math
import re

import tfplace  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TF)
import pytest

from tfplace.errors import GraphImportError
from tfplace.measurement.calibration_runs import ONE_DEVICE_ONLY
from tfplace.models import calibration_suite, common, registry

SMALL = [
    ("resnet_like", dict(batch_size=2, image_size=8, widths=(4, 8),
                         blocks_per_stage=1)),
    ("transformer", dict(batch_size=2, seq_len=4, vocab=50, d_model=8,
                         num_heads=2, d_ff=8, num_layers=1)),
    ("random_dag", dict(batch_size=4, hidden=8, num_layers=3, width=2)),
] + calibration_suite.suite("tiny") + [
    ("calib_attention", dict(batch_size=2, seq_len=3, heads=2, key_dim=2,
                          blocks=1)),
    ("calib_depthwise", dict(batch_size=2, image_size=8, channels=2,
                             kernel_size=5)),
    ("calib_conv", dict(batch_size=2, image_size=8, channels=4)),
    ("calib_embedding", dict(batch_size=2, seq_len=3, vocab=20, dim=4)),
    ("calib_embedding", dict(batch_size=2, seq_len=3, vocab=20, dim=4,
                             optimizer="adam")),
    ("calib_elementwise", dict(batch_size=2, width=8, gelu=True)),
    ("calib_loop", dict(batch_size=2, seq_len=3, input_dim=4, hidden=4)),
]


@pytest.mark.parametrize("name,sizes", SMALL,
                         ids=[f"{n}_{i}" for i, (n, _) in enumerate(SMALL)])
def test_steps_are_finite_deterministic_and_import(name, sizes):
  built = registry.build_tf_graph(name, **sizes)
  losses = common.run_steps(built, num_steps=2)
  assert all(math.isfinite(x) for x in losses)
  assert losses == common.run_steps(registry.build_tf_graph(name, **sizes),
                                    num_steps=2)
  graph = registry.build_model(name, **sizes)
  assert graph.fetches.train_ops == ("train_op",)
  assert graph.num_ops == len(built.graph.get_operations())


def _types(name, **sizes):
  return collections.Counter(op.type for op in
                             registry.build_model(name, **sizes).ops)


def test_each_graph_has_the_ops_its_kind_promises():
  resnet = _types(*SMALL[0][:1], **SMALL[0][1])
  assert resnet["Conv2D"] >= 5 and resnet["FusedBatchNormV3"] >= 5
  transformer = _types("transformer", **SMALL[1][1])
  assert transformer["BatchMatMulV2"] >= 2 and transformer["Softmax"] >= 1
  assert transformer["ResourceGather"] >= 1
  dag = _types("random_dag", **SMALL[2][1])
  assert dag["MatMul"] >= 1
  assert _types("calib_conv", **SMALL[-5][1])["MaxPool"] == 1
  assert _types("calib_embedding", **SMALL[-4][1])["ResourceGather"] == 2
  elementwise = _types("calib_elementwise", batch_size=2, width=8)
  assert {"Tanh", "Exp", "Rsqrt", "Transpose", "ConcatV2", "Pad",
          "Cast"} <= set(elementwise)


def test_adam_and_gelu_add_the_sparse_update_and_erfc_to_the_suite():
  sgd = _types("calib_embedding", **SMALL[-4][1])
  adam = _types("calib_embedding", **SMALL[-3][1])
  # Adam sums each table's sparse gradient per distinct row, then scatters
  # it into both slots; SGD scatters the gradient into the table.
  for op_type, count in (("Unique", 2), ("UnsortedSegmentSum", 2),
                         ("ResourceScatterAdd", 4)):
    assert adam[op_type] == count, op_type
  assert sgd["Unique"] == 0 and sgd["UnsortedSegmentSum"] == 0
  assert sgd["ResourceScatterAdd"] == 2
  exact = _types("calib_elementwise", **SMALL[-2][1])
  assert exact["Erfc"] == 1
  assert _types("calib_elementwise", batch_size=2, width=8)["Erfc"] == 0
  default = calibration_suite.suite()
  assert any(n == "calib_embedding" and c.get("optimizer") == "adam"
             for n, c in default)
  assert all(c.get("gelu") for n, c in default if n == "calib_elementwise")


def test_calib_embedding_names_an_unknown_optimizer():
  with pytest.raises(GraphImportError, match="unknown optimizer 'lamb'"):
    registry.build_tf_graph("calib_embedding", optimizer="lamb")


def test_calib_conv_projection_adds_a_strided_1x1_shortcut():
  sizes = SMALL[-5][1]
  plain = registry.build_model("calib_conv", **sizes)
  projected = registry.build_model("calib_conv", **sizes, projection=True)

  def strided(graph):
    return sorted(op.name for op in graph.ops
                  if op.type == "Conv2D" and op.stride == 2)

  assert strided(plain) == ["conv_3/Conv2D"]
  assert strided(projected) == ["conv_3/Conv2D", "project/Conv2D"]
  assert {n for n, c in calibration_suite.suite()
          if c.get("projection")} == {"calib_conv"}


def test_calib_depthwise_runs_each_depthwise_kernel_at_both_strides():
  graph = registry.build_model("calib_depthwise", **SMALL[-6][1])
  types = collections.Counter(op.type for op in graph.ops)
  for kind in ("DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput",
               "DepthwiseConv2dNativeBackpropFilter"):
    strides = sorted(op.stride for op in graph.ops if op.type == kind)
    assert strides == [1, 1, 1, 2, 2, 2], kind
  assert types["Relu6"] == 6 and types["Relu6Grad"] == 6
  assert not [t for t in types if t.startswith("Conv2D")]
  kernels = {op.output_shapes[0][:2] for op in graph.ops
             if op.type == "DepthwiseConv2dNativeBackpropFilter"}
  assert kernels == {(5, 5)}
  # Residual adds where a block keeps its shape: the stride-1 blocks.
  assert sorted(op.name for op in graph.ops if op.type == "AddV2"
                and re.fullmatch(r"block_\d/add", op.name)) == [
                    "block_0/add", "block_2/add", "block_4/add"]


# The equations of Keras's MultiHeadAttention step (tf_keras 2.x: query,
# key and value projections, scores, context, output projection) and of
# their gradients, as a traced Keras training step has them.
KERAS_ATTENTION_EQUATIONS = {
    "abc,cde->abde", "abde,cde->abc", "abde,abc->cde", "aecd,abcd->acbe",
    "acbe,aecd->abcd", "abcd,cde->abe", "abe,cde->abcd", "abe,abcd->cde",
    "abcd,aecd->acbe", "abcd,acbe->aecd", "acbe,abcd->aecd"}


def _equations(built):
  return collections.Counter(node.attr["equation"].s.decode()
                             for node in built.graph.as_graph_def().node
                             if node.op == "Einsum")


def test_calib_attention_runs_keras_attentions_equations_and_layer_norm():
  sizes = dict(SMALL[-7][1], blocks=2)
  equations = _equations(registry.build_tf_graph("calib_attention", **sizes))
  assert set(equations) == KERAS_ATTENTION_EQUATIONS
  assert sum(equations.values()) == 2 * 18
  keras = _equations(registry.build_tf_graph(
      "keras_transformer", batch_size=2, seq_len=3, vocab=10, dim=4,
      heads=2, feed_forward=4, layers=1))
  assert set(keras) == KERAS_ATTENTION_EQUATIONS
  graph = registry.build_model("calib_attention", **sizes)
  assert all(op.flops > 0 for op in graph.ops if op.type == "Einsum")
  # Scores and context (and their gradients) are batched: 6 per block;
  # the classifier's input gradient is a MatMul by its transposed weights.
  variants = collections.Counter((op.type, op.variant) for op in graph.ops
                                 if op.variant)
  assert variants == {("Einsum", "batched"): 2 * 6,
                      ("FusedBatchNormV3", "channels_first"): 2,
                      ("FusedBatchNormGradV3", "channels_first"): 2,
                      ("MatMul", "transpose_b"): 1}
  # Layer norm as Keras runs it: rows as the channels of an NCHW batch
  # norm, whose reserve space (unknown to TF's shape function) is a scalar.
  norm = graph.ops[graph.index["attention_0/FusedBatchNormV3"]]
  assert norm.output_shapes[0] == (1, 2 * 3, 4, 1)
  assert norm.output_shapes[5] == ()


def test_one_device_only_graphs_are_the_suites_op_cost_graphs():
  # Calibration measures them on each device alone (no split runs).
  assert ONE_DEVICE_ONLY == {"calib_depthwise", "calib_attention"}
  assert ONE_DEVICE_ONLY <= {n for n, _ in calibration_suite.suite()}


def test_random_dag_shape_follows_its_seed():
  a = registry.build_model("random_dag", **SMALL[2][1])
  b = registry.build_model("random_dag", **SMALL[2][1], seed=2)
  assert a.fingerprint == registry.build_model("random_dag",
                                               **SMALL[2][1]).fingerprint
  assert a.fingerprint != b.fingerprint


def test_bad_sizes_and_suites_raise():
  with pytest.raises(GraphImportError, match="multiple of num_heads"):
    registry.build_tf_graph("transformer", d_model=10, num_heads=4)
  with pytest.raises(GraphImportError, match="multiple of 4"):
    registry.build_tf_graph("calib_elementwise", width=6)
  with pytest.raises(GraphImportError, match="widths"):
    registry.build_tf_graph("resnet_like", widths=())
  with pytest.raises(GraphImportError, match="unknown calibration suite"):
    calibration_suite.suite("huge")
  assert {n for n, _ in calibration_suite.suite()} == {
      "calib_conv", "calib_depthwise", "calib_attention", "calib_matmul",
      "calib_embedding", "calib_elementwise", "calib_loop"}


def test_matmuls_by_a_transposed_right_operand_are_their_own_variant():
  built = registry.build_tf_graph("chain_mlp", num_layers=2, batch_size=2,
                                  input_size=4, hidden=4)
  graph = registry.build_model("chain_mlp", num_layers=2, batch_size=2,
                               input_size=4, hidden=4)
  transposed = {node.name: node.attr["transpose_b"].b
                for node in built.graph.as_graph_def().node
                if node.op == "MatMul"}
  # Forward and weight-gradient products plain, input gradients apart.
  assert sorted(transposed.values()) == [False] * 6 + [True] * 3
  assert {op.name: op.variant == "transpose_b" for op in graph.ops
          if op.type == "MatMul"} == transposed


def test_calib_conv_marks_its_narrow_window_filter_gradients():
  # Windows (filter rows x columns x input channels): conv_0 3x3x3 = 27,
  # conv_1 3x3x16 = 144, conv_2 1x1x16, conv_3 3x3x16 (stride 2), conv_4
  # 1x1x32, the projection 1x1x16 (stride 2): the 3x3 ones over 16
  # channels are plain, the others narrow.
  graph = registry.build_model("calib_conv", batch_size=2, image_size=8,
                               channels=16, projection=True)
  filters = {op.name.split("/")[-3]: op.variant for op in graph.ops
             if op.type == "Conv2DBackpropFilter"}
  assert filters == {"conv_0": "narrow_window", "conv_1": "",
                     "conv_2": "narrow_window", "conv_3": "",
                     "conv_4": "narrow_window", "project": "narrow_window"}
  assert not any(op.variant for op in graph.ops
                 if op.type in ("Conv2D", "Conv2DBackpropInput"))
