"""One op's features (shapes, bytes, FLOPs, kernels) from its NodeDef and
`tf.Operation`, shared by the importers and the control-flow costing."""

from typing import Callable, Optional, Sequence, Tuple

import numpy as np

from tfplace.graph import kernels, op_flops, unknown_dims, variable_copies
from tfplace.graph.conv_geometry import ConvGeometry, conv_geometry
from tfplace.graph.op_graph import (COPY_ON_READ, VARIABLE_OPS,
                                    ControlFlowCost, Op)

# Bytes of one tensor whose dtype has no fixed element size (a handle).
HANDLE_BYTES = 8
_NON_NUMERIC = ("resource", "variant", "string")
# Outputs (op type, index) whose shape TF's shape functions leave unknown
# although the kernel's is fixed: FusedBatchNormV3's reserve_space_3, a
# scalar from the CPU kernel (measured; a GPU's cuDNN workspace behind it
# is not modelled). Every Keras batch or layer normalization has one.
_FIXED_OUTPUT_SHAPES = {("FusedBatchNormV3", 5): ()}
# Ops whose output has their first input's shape: a fixed shape above passes
# through them (the gradient's ZerosLike of an unused reserve_space_3 warned
# of an unknown dimension in every Keras layer normalization's step).
_SAME_SHAPE_AS_INPUT = frozenset({"ZerosLike", "OnesLike", "Identity"})


def resolve_shape(shape, unknown_dim: int, tensor=None) -> Tuple[int, ...]:
  """A static `tf.TensorShape` as ints, unknown dimensions -> unknown_dim
  (`tensor`, whose shape it is, is noted in `unknown_dims`)."""
  if shape.rank is None:
    unknown_dims.note(tensor)
    return (unknown_dim,)
  dims = shape.as_list()
  if None in dims:
    unknown_dims.note(tensor)
  return tuple(unknown_dim if d is None else int(d) for d in dims)


def tensor_bytes(dtype, shape: Sequence[int]) -> int:
  """Bytes of a tensor (HANDLE_BYTES for resources, variants, strings)."""
  base = dtype.base_dtype
  if base.name in _NON_NUMERIC:
    return HANDLE_BYTES
  return int(base.size) * op_flops.num_elements(shape)


def _param_bytes(node, unknown_dim: int) -> int:
  if node.op not in VARIABLE_OPS:
    return 0
  import tensorflow as tf
  shape = resolve_shape(tf.TensorShape(node.attr["shape"].shape),
                        unknown_dim)
  return tensor_bytes(tf.as_dtype(node.attr["dtype"].type), shape)


def _attr_reader(node, tf_op) -> Callable[[str], object]:
  """NodeDef attribute by name (None when absent)."""

  def attr(key: str):
    return tf_op.get_attr(key) if key in node.attr else None

  return attr


def op_shapes_and_flops(node, tf_op, unknown_dim: int):
  """(output shapes, input shapes, FLOPs of one execution) of an op."""
  shapes = tuple(_tensor_shape(t, unknown_dim) for t in tf_op.outputs)
  in_shapes = [_tensor_shape(t, unknown_dim) for t in tf_op.inputs]
  return shapes, in_shapes, op_flops.op_flops(node.op, in_shapes, shapes,
                                              _attr_reader(node, tf_op))


def _tensor_shape(tensor, unknown_dim: int) -> Tuple[int, ...]:
  if tensor.shape.rank is None:
    fixed = _FIXED_OUTPUT_SHAPES.get((tensor.op.type, tensor.value_index))
    if fixed is not None:
      return fixed
    if tensor.op.type in _SAME_SHAPE_AS_INPUT and tensor.op.inputs:
      source = tensor.op.inputs[0]
      if (source.op.type, source.value_index) in _FIXED_OUTPUT_SHAPES:
        return _tensor_shape(source, unknown_dim)
  if tensor.op.type == "BroadcastGradientArgs":
    reduced = _broadcast_reduction_shape(tensor)
    if reduced is not None:
      return reduced
  return resolve_shape(tensor.shape, unknown_dim, tensor)


def _broadcast_reduction_shape(tensor) -> Optional[Tuple[int]]:
  """The shape of BroadcastGradientArgs's output k when its input shapes
  are static values (None otherwise).

  The output lists the axes along which input k was broadcast: none when
  the inputs are equal, else those where input k, padded with leading ones
  to the longest input's rank, is 1 (TF's `BCast`). TF's shape function
  leaves its length unknown even when the shapes are known: a TF1 graph
  built with an unknown batch and imported with `batch_size` has them
  static once the batch is set.
  """
  import tensorflow as tf
  values = [tf.get_static_value(t) for t in tensor.op.inputs]
  if any(v is None or np.ndim(v) != 1 for v in values):
    return None
  if all(np.array_equal(v, values[0]) for v in values):
    return (0,)
  rank = max(len(v) for v in values)
  mine = values[tensor.value_index]
  return (rank - len(mine) + int(np.sum(np.asarray(mine) == 1)),)


def read_op(node, tf_op, unknown_dim: int,
            body: Optional[ControlFlowCost] = None,
            variant_bytes: Optional[Callable[[object], Optional[int]]] = None
            ) -> Op:
  """Features of one op from its NodeDef and tf.Operation.

  Args:
    node: the op's NodeDef.
    tf_op: the same op as a `tf.Operation` (static shapes).
    unknown_dim: size given to unknown dimensions.
    body: for functional control flow, what its functions run (its FLOPs
      become the op's).
    variant_bytes: optional `tensor -> bytes or None` for variant outputs
      whose real size is known (TensorList accumulators).
  """
  shapes, in_shapes, flops = op_shapes_and_flops(node, tf_op, unknown_dim)
  equation = node.attr["equation"].s.decode() if node.op == "Einsum" else ""
  dtypes = tuple(t.dtype for t in tf_op.outputs)
  out_bytes = [tensor_bytes(d, s) for d, s in zip(dtypes, shapes)]
  if variant_bytes is not None:
    for k, t in enumerate(tf_op.outputs):
      if t.dtype.name == "variant":
        known = variant_bytes(t)
        out_bytes[k] = out_bytes[k] if known is None else int(known)
  coloc = tuple(s.decode()[len("loc:@"):] for s in node.attr["_class"].list.s
                if s.startswith(b"loc:@")) if "_class" in node.attr else ()
  conv = conv_geometry(node.op, in_shapes, shapes,
                       dtypes[0].size if dtypes else 0,
                       _attr_reader(node, tf_op))
  # Each copied byte is read once and written once.
  variable_copy = 2 * variable_copies.copied_variable_bytes(tf_op)
  return Op(
      name=node.name, type=node.op, output_shapes=shapes,
      output_dtypes=tuple(d.name for d in dtypes),
      output_bytes=tuple(out_bytes),
      param_bytes=_param_bytes(node, unknown_dim),
      flops=body.flops if body is not None else flops,
      kernels=kernels.kernel_device_types(node.op),
      requested_device=node.device, colocation_names=coloc, body=body,
      stride=_stride(node),
      variant=(COPY_ON_READ if variable_copy else cost_variant(node, conv)),
      conv=conv,
      matrix_products=op_flops.matrix_products(
          node.op, shapes[0] if shapes else (), equation),
      copy_bytes=variable_copy + _transpose_bytes(equation, in_shapes,
                                                  shapes, dtypes))


def _transpose_bytes(equation: str, in_shapes, shapes, dtypes) -> int:
  """The bytes an einsum (`equation`; "" for other ops) reads and writes
  to put its operands or result into another order."""
  if not equation or not shapes or not dtypes:
    return 0
  outer, inner = op_flops.einsum_transposes(equation, in_shapes, shapes[0])
  # Each moved element is read once and written once.
  return int(2 * dtypes[0].size
             * (outer + op_flops.INNER_TRANSPOSE_WEIGHT * inner))


# A filter gradient whose window (filter rows x columns x input channels)
# is under this many values is "narrow_window" (`cost_variant`).
NARROW_WINDOW = 144


def cost_variant(node, conv: Optional[ConvGeometry] = None) -> str:
  """`Op.variant` of a NodeDef: "batched" for an einsum with batch indices,
  "channels_first" for a fused batch norm (or its gradient) over NCHW
  data, "narrow_window" for a filter gradient whose window (`conv`, its
  geometry) is under `NARROW_WINDOW` values, "transpose_b" for a MatMul by
  its transposed right operand (a dense layer's input gradient, dy x W^T),
  "" otherwise.

  A filter gradient multiplies window x (batch x pixels) by (batch x
  pixels) x output channels: on a CPU core here the narrow ones (1x1
  filters over up to 128 channels, first layers over 3) ran at 60-93
  GFLOP/s, the 3x3 ones over 16-64 channels at 127-200, at the same work
  (2026-11-29, WORKSPACE_NOTES.md, issue 13). A MatMul with transpose_b
  took 1.9x its roofline in the suite (r84), the plain and transpose_a
  ones 1.3x and 1.2x; 2.3-4.6x against 1.2-1.3x in random_dag, mlp_towers
  and rnnlm."""
  if (node.op == "Conv2DBackpropFilter" and conv is not None
      and conv.window < NARROW_WINDOW):
    return "narrow_window"
  if node.op == "MatMul" and node.attr["transpose_b"].b:
    return "transpose_b"
  if node.op == "Einsum" and op_flops.einsum_is_batched(
      node.attr["equation"].s.decode()):
    return "batched"
  if node.op.startswith("FusedBatchNorm") and (
      node.attr["data_format"].s == b"NCHW"):
    return "channels_first"
  return ""


def _stride(node) -> int:
  """The largest entry of the NodeDef's `strides` (1 without one)."""
  if "strides" not in node.attr:
    return 1
  return max((int(x) for x in node.attr["strides"].list.i), default=1)
