"""What an op costs the host that launches it on a GPU, by kind.

On a GPU the executor's thread launches an op (shape checks, allocation,
the kernel launches: cuDNN's convolutions run 2-6 kernels) and goes on to
the next while the kernels run on the stream. The training steps of the
calibration suite and of the benchmark graphs are launch-bound on an H200:
kernels are 3-15 % of a GPU-only step, and the launches never overlap
(WORKSPACE_NOTES.md, "GPUs"). Untraced, a launch costs ~4 us for an
element-wise op and far more for a convolution or a batch norm; traced,
every launch is 2-10x longer (the GPU tracer's callbacks), so the launch
cost is measured on untraced chains of ops of one kind
(`cluster_benchmark`: `DeviceBenchmark.launch_s`), and each op type is
charged its kind's launch: a convolution's, a batch norm's, a matmul's, an
element-wise op's (any other op that runs a kernel), or nothing's (an op
that only passes a buffer on: Identity, Reshape, a variable's handle).
"""

from typing import Collection

CONV = "conv"
CONV_INPUT = "conv_input"
CONV_FILTER = "conv_filter"
BATCH_NORM = "batch_norm"
BATCH_NORM_GRAD = "batch_norm_grad"
MATMUL = "matmul"
ELEMENTWISE = "elementwise"
NO_KERNEL = "no_kernel"
# Every kind, in the benchmark's order.
KINDS = (CONV, CONV_INPUT, CONV_FILTER, BATCH_NORM, BATCH_NORM_GRAD, MATMUL,
         ELEMENTWISE, NO_KERNEL)

_KIND_OF_TYPE = {
    **{t: CONV for t in ("Conv2D", "DepthwiseConv2dNative", "Conv3D")},
    **{t: CONV_INPUT for t in ("Conv2DBackpropInput",
                               "DepthwiseConv2dNativeBackpropInput",
                               "Conv3DBackpropInputV2")},
    **{t: CONV_FILTER for t in ("Conv2DBackpropFilter",
                                "DepthwiseConv2dNativeBackpropFilter",
                                "Conv3DBackpropFilterV2")},
    **{t: BATCH_NORM for t in ("FusedBatchNorm", "FusedBatchNormV2",
                               "FusedBatchNormV3")},
    **{t: BATCH_NORM_GRAD for t in ("FusedBatchNormGrad",
                                    "FusedBatchNormGradV2",
                                    "FusedBatchNormGradV3")},
    **{t: MATMUL for t in ("MatMul", "BatchMatMul", "BatchMatMulV2",
                           "BatchMatMulV3")},
    **{t: NO_KERNEL for t in (
        "Identity", "IdentityN", "NoOp", "Const", "VarHandleOp",
        "ReadVariableOp", "Reshape", "Shape", "ShapeN", "Size", "Rank",
        "ExpandDims", "Squeeze", "StopGradient", "PreventGradient",
        "Placeholder", "PlaceholderWithDefault", "ControlTrigger")},
}


def launch_kind(op_type: str, kernel_free: Collection[str] = ()) -> str:
  """The launch kind of an op type.

  Args:
    op_type: the TF op type.
    kernel_free: op types whose traced executions ran no kernel on the
      device (`Calibration.kernel_free`); such a type is `NO_KERNEL` (the
      shape arithmetic in host memory: StridedSlice, InvertPermutation).

  Returns:
    The kind in the table of known types, else `NO_KERNEL` for a type that
    ran no kernel, else `ELEMENTWISE`.
  """
  kind = _KIND_OF_TYPE.get(op_type)
  if kind is not None:
    return kind
  if op_type in kernel_free:
    return NO_KERNEL
  return ELEMENTWISE
