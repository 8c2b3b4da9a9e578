"""Launch kinds of op types (tfplace.cost.launch_kinds)."""

from tfplace.cost.launch_kinds import KINDS, launch_kind


def test_op_types_map_to_their_launch_kind():
  assert launch_kind("Conv2D") == "conv"
  assert launch_kind("Conv2DBackpropInput") == "conv_input"
  assert launch_kind("Conv2DBackpropFilter") == "conv_filter"
  assert launch_kind("FusedBatchNormV3") == "batch_norm"
  assert launch_kind("FusedBatchNormGradV3") == "batch_norm_grad"
  assert launch_kind("BatchMatMulV2") == "matmul"
  assert launch_kind("VarHandleOp") == "no_kernel"
  # Any other type runs a kernel, unless calibration saw it run none.
  assert launch_kind("StridedSlice") == "elementwise"
  assert launch_kind("StridedSlice", ("StridedSlice",)) == "no_kernel"
  assert launch_kind("StridedSlice", ("Shape",)) == "elementwise"
  # A type of the table keeps its kind.
  assert launch_kind("MatMul", ("MatMul",)) == "matmul"
  assert {launch_kind(t) for t in ("Conv2D", "MatMul", "AddV2",
                                   "Identity")} <= set(KINDS)
