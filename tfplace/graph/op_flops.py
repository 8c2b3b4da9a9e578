"""Analytical FLOPs of one execution of a TF op, from its shapes and attrs.

Counts follow the op definitions: a multiply-add is 2 FLOPs; an elementwise
op costs one FLOP per output element (a few for transcendental ones is not
modelled); data movement (Identity, Reshape, Concat, ...) costs 0. Unknown op
types cost 0: the profiled cost model covers them.
"""

import math
from typing import Callable, Dict, List, Optional, Sequence, Tuple

Shape = Tuple[int, ...]

_UNARY = frozenset({
    "Abs", "Neg", "Relu", "Relu6", "Elu", "Selu", "LeakyRelu", "Tanh",
    "Sigmoid", "Exp", "Expm1", "Log", "Log1p", "Sqrt", "Rsqrt", "Square",
    "Reciprocal", "Inv", "Sign", "Floor", "Ceil", "Round", "Sin", "Cos",
    "Erf", "Erfc", "Softplus", "Softsign", "Cast", "ClipByValue", "Gelu",
})
_BINARY = frozenset({
    "Add", "AddV2", "Sub", "Mul", "Div", "RealDiv", "DivNoNan", "FloorDiv",
    "FloorMod", "Maximum", "Minimum", "Pow", "SquaredDifference", "BiasAdd",
    "BiasAddV1", "ReluGrad", "Relu6Grad", "EluGrad", "SeluGrad", "TanhGrad",
    "SigmoidGrad", "RsqrtGrad", "SqrtGrad", "ReciprocalGrad", "SoftplusGrad",
    "Greater", "GreaterEqual", "Less", "LessEqual", "Equal", "NotEqual",
    "LogicalAnd", "LogicalOr", "Select", "SelectV2", "MulNoNan",
    "LeakyReluGrad", "AssignAddVariableOp", "AssignSubVariableOp",
})
_REDUCTIONS = frozenset({
    "Sum", "Mean", "Max", "Min", "Prod", "ArgMax", "ArgMin", "All", "Any",
    "L2Loss", "BiasAddGrad", "EuclideanNorm",
})
# FLOPs per updated parameter of the optimizer apply ops.
_APPLY = {
    "ApplyGradientDescent": 2, "ResourceApplyGradientDescent": 2,
    "ApplyMomentum": 4, "ResourceApplyMomentum": 4,
    "ResourceApplyKerasMomentum": 4, "ApplyAdam": 12, "ResourceApplyAdam": 12,
    "ApplyRMSProp": 8, "ResourceApplyRMSProp": 8, "ApplyAdagrad": 5,
    "ResourceApplyAdagrad": 5, "ResourceApplyAdagradV2": 5,
}
# FLOPs per element of the main input.
_PER_INPUT_ELEMENT = {
    "Softmax": 5, "LogSoftmax": 5,
    "SoftmaxCrossEntropyWithLogits": 8,
    "SparseSoftmaxCrossEntropyWithLogits": 8,
    "FusedBatchNorm": 10, "FusedBatchNormV2": 10, "FusedBatchNormV3": 10,
    "FusedBatchNormGrad": 14, "FusedBatchNormGradV2": 14,
    "FusedBatchNormGradV3": 14, "LRN": 8, "LRNGrad": 10,
    "BroadcastGradientArgs": 0,
}

AttrGetter = Callable[[str], object]


def num_elements(shape: Sequence[int]) -> int:
  """Elements of a static shape (a scalar has 1)."""
  return math.prod(int(d) for d in shape)


def op_flops(op_type: str, input_shapes: Sequence[Shape],
             output_shapes: Sequence[Shape],
             attr: Optional[AttrGetter] = None) -> float:
  """FLOPs of one execution of an op.

  Args:
    op_type: the TF op type.
    input_shapes: static shape of each data input (unknown dims resolved).
    output_shapes: static shape of each output.
    attr: returns a NodeDef attr value (python form) or None if absent.

  Returns:
    The FLOP count (0 for ops that only move data or are not modelled).
  """
  attr = attr or (lambda _: None)
  out = num_elements(output_shapes[0]) if output_shapes else 0
  first_in = num_elements(input_shapes[0]) if input_shapes else 0
  if op_type in _UNARY or op_type in _BINARY:
    return float(out)
  if op_type == "AddN":
    return float(out * max(len(input_shapes) - 1, 1))
  if op_type in _REDUCTIONS:
    return float(first_in)
  if op_type in _APPLY:
    return float(_APPLY[op_type] * (num_elements(input_shapes[-1])
                                    if input_shapes else 0))
  if op_type in _PER_INPUT_ELEMENT:
    return float(_PER_INPUT_ELEMENT[op_type] * first_in)
  handler = _HANDLERS.get(op_type)
  if handler is None:
    return 0.0
  return float(handler(input_shapes, output_shapes, attr))


def _matmul(ins, outs, attr) -> float:
  a = ins[0]
  if len(a) < 2:
    return 0.0
  k = a[0] if attr("transpose_a") else a[1]
  return 2.0 * num_elements(outs[0]) * k


def _batch_matmul(ins, outs, attr) -> float:
  a = ins[0]
  if len(a) < 2:
    return 0.0
  k = a[-2] if attr("adj_x") else a[-1]
  return 2.0 * num_elements(outs[0]) * k


def einsum_is_batched(equation: str) -> bool:
  """True if a two-input einsum `equation` has batch indices: a letter (or
  "...") in both inputs and the output ("aecd,abcd->acbe": a and c)."""
  terms, out = _einsum_terms(equation)
  if len(terms) != 2:
    return False

  def indices(term):
    return set(term.replace("...", "")) | ({"..."} if "..." in term else set())

  return bool(indices(terms[0]) & indices(terms[1]) & indices(out))


BATCH_MATMUL_OP_TYPES = frozenset({"BatchMatMul", "BatchMatMulV2",
                                   "BatchMatMulV3"})


def matrix_products(op_type: str, output_shape: Shape,
                    equation: str = "") -> int:
  """The matrix products one execution runs: TF's batched matmul kernel
  (a BatchMatMul, and a two-input einsum, which TF reduces to one) runs one
  product per batch index of its output: the output's dims but the last two
  for a BatchMatMul, those of an einsum's batch letters (in both inputs and
  the output; "..." too) for an einsum (`equation`). 1 for other ops."""
  if op_type in BATCH_MATMUL_OP_TYPES:
    return max(1, num_elements(output_shape[:-2]))
  if op_type != "Einsum":
    return 1
  terms, out = _einsum_terms(equation)
  if len(terms) != 2:
    return 1
  labels = _einsum_labels(out, len(output_shape))
  if labels is None or len(labels) != len(output_shape):
    return 1
  # A "..." dim (".k") is a batch dim; a letter in both inputs too.
  batch = [n for label, n in zip(labels, output_shape)
           if label.startswith(".")
           or (label in terms[0] and label in terms[1])]
  return max(1, math.prod(int(n) for n in batch))


# An einsum transposes an operand or its result by copying it; one whose
# last dimension moves (a strided copy) took twice the time per byte of one
# that moves whole rows, on both CPU hosts measured (Keras attention's
# equations, WORKSPACE_NOTES.md, twenty-third session).
INNER_TRANSPOSE_WEIGHT = 2


def einsum_transposes(equation: str, in_shapes: Sequence[Shape],
                      output_shape: Shape) -> Tuple[int, int]:
  """(elements moved by transposes that keep the last dimension, elements
  moved by transposes that move it) of one execution of TF's einsum kernel.

  The kernel orders each input's dimensions as batch, free (in this input
  and the output), contracted, reduced, each kind in order of first
  appearance in the equation, and copies the input where that order is
  not the one it has (an input ordered batch, contracted, free is used as
  it is: the matmul transposes it for free); the product comes out as
  batch, the first input's free, the second's free (one input: its
  reduced and sorted self), and is copied into the output's order where
  that differs. "aecd,abcd->acbe" (Keras attention's scores) copies both
  inputs and its result; "abc,cde->abde" nothing. (0, 0) where the
  equation or the shapes cannot be read.
  """
  terms, out = _einsum_terms(equation)
  if len(terms) not in (1, 2) or len(terms) != len(in_shapes):
    return 0, 0
  inputs = [_einsum_labels(t, len(s)) for t, s in zip(terms, in_shapes)]
  output = _einsum_labels(out, len(output_shape))
  if (any(l is None or len(l) != len(s) for l, s in zip(inputs, in_shapes))
      or output is None or len(output) != len(output_shape)):
    return 0, 0
  first_seen: Dict[str, int] = {}
  for labels in inputs + [output]:
    for label in labels:
      first_seen.setdefault(label, len(first_seen))

  def kind(label: str) -> int:
    # 0 broadcast ("..."), 1 batch, 2 free, 3 contracted, 4 reduced.
    if label.startswith("."):
      return 0
    both = len(inputs) == 2 and all(label in l for l in inputs)
    if label in output:
      return 1 if both else 2
    return 3 if both else 4

  swapped = (0, 1, 3, 2, 4)  # Contracted before free: no copy needed.
  outer = inner = 0
  free: List[List[str]] = []
  for labels, shape in zip(inputs, in_shapes):
    keys = [(swapped[kind(l)], first_seen[l]) for l in labels]
    order = list(range(len(labels)))
    if any(a > b for a, b in zip(keys, keys[1:])):
      order.sort(key=lambda i: (kind(labels[i]), first_seen[labels[i]]))
    if len(labels) >= 2 and order != list(range(len(labels))):
      moved = num_elements(shape)
      if order[-1] == len(labels) - 1:
        outer += moved
      else:
        inner += moved
    free.append([labels[i] for i in order if kind(labels[i]) == 2])
  product = sorted((l for l in first_seen if kind(l) in (0, 1)),
                   key=lambda l: (kind(l), first_seen[l]))
  product += [l for labels in free for l in labels]
  if len(output) >= 2 and product != output:
    moved = num_elements(output_shape)
    if product[-1] == output[-1]:
      outer += moved
    else:
      inner += moved
  return outer, inner


def _einsum_terms(equation: str) -> Tuple[List[str], str]:
  """(input terms, output term) of an explicit einsum equation, spaces
  dropped; ([], "") without "->"."""
  equation = equation.replace(" ", "")
  if "->" not in equation:
    return [], ""
  lhs, out = equation.split("->")
  return lhs.split(","), out


def _einsum_labels(term: str, rank: int) -> Optional[List[str]]:
  """The labels of one einsum term of a tensor of `rank` dims, "..."
  expanded to one label per dim it stands for (".0", ".1", ... from the
  left, as TF's kernel numbers them); None if the term has more letters
  than the rank."""
  letters = list(term.replace("...", ""))
  if "..." not in term:
    return letters
  extra = rank - len(letters)
  if extra < 0:
    return None
  at = term.index("...")
  return letters[:at] + [f".{k}" for k in range(extra)] + letters[at:]


def _einsum(ins, outs, attr) -> float:
  """2 x output elements x the sizes of the contracted indices (those of the
  inputs that the output lacks); one input: a transpose (0) or a reduction
  (1 FLOP per input element). Ellipses ("...") stand for the dims the
  letters leave; an equation without "->" is not costed."""
  equation = attr("equation")
  if isinstance(equation, bytes):
    equation = equation.decode()
  if not equation or not outs:
    return 0.0
  terms, out = _einsum_terms(equation)
  if not terms or len(terms) != len(ins):
    return 0.0
  sizes = {}
  for term, shape in zip(terms, ins):
    letters = term.replace("...", "")
    if "..." in term:
      before = term.index("...")
      rest = len(shape) - len(letters)
      dims = list(shape[:before]) + list(shape[before + rest:])
    else:
      dims = list(shape)
    if len(dims) != len(letters):
      return 0.0
    sizes.update(zip(letters, (int(d) for d in dims)))
  if len(ins) == 1:
    return float(num_elements(ins[0])) if set(sizes) - set(out) else 0.0
  contracted = math.prod(n for letter, n in sizes.items()
                         if letter not in out)
  return 2.0 * num_elements(outs[0]) * contracted


def _window_mads(f) -> int:
  """Multiply-adds per output of a 2-D or 3-D convolution: the filter
  [kh, kw, cin, cout] or [kd, kh, kw, cin, cout] without cout (0 if the
  filter's shape is not one of those)."""
  return math.prod(int(d) for d in f[:-1]) if len(f) in (4, 5) else 0


def _conv(ins, outs, attr) -> float:
  # out [n, (d,) h, w, cout]: 2 x the window's multiply-adds per output.
  return 2.0 * num_elements(outs[0]) * _window_mads(ins[1])


def _conv_backprop_input(ins, outs, attr) -> float:
  # inputs: input_sizes, filter, out_backprop: same work as the forward conv.
  return 2.0 * num_elements(ins[2]) * _window_mads(ins[1])


def _conv_backprop_filter(ins, outs, attr) -> float:
  # inputs: input, filter_sizes, out_backprop; output: the filter gradient.
  return 2.0 * num_elements(ins[2]) * _window_mads(outs[0])


def _depthwise(ins, outs, attr) -> float:
  f = ins[1]  # [kh, kw, cin, multiplier]; out channels = cin * multiplier.
  return 2.0 * num_elements(outs[0]) * f[0] * f[1] if len(f) == 4 else 0.0


def _depthwise_backprop_input(ins, outs, attr) -> float:
  f, dy = ins[1], ins[2]
  return 2.0 * num_elements(dy) * f[0] * f[1] if len(f) == 4 else 0.0


def _depthwise_backprop_filter(ins, outs, attr) -> float:
  f, dy = outs[0], ins[2]
  return 2.0 * num_elements(dy) * f[0] * f[1] if len(f) == 4 else 0.0


def _window(attr) -> int:
  ksize = attr("ksize") or [1]
  return math.prod(int(k) for k in ksize)


def _pool(ins, outs, attr) -> float:
  return float(num_elements(outs[0]) * _window(attr))


def _pool_grad(ins, outs, attr) -> float:
  # MaxPoolGrad(orig_input, orig_output, grad); AvgPoolGrad(shape, grad).
  return float(num_elements(ins[-1]) * _window(attr))


_HANDLERS: Dict[str, Callable[..., float]] = {
    "MatMul": _matmul,
    "BatchMatMul": _batch_matmul, "BatchMatMulV2": _batch_matmul,
    "BatchMatMulV3": _batch_matmul,
    "Einsum": _einsum, "_FusedMatMul": _matmul,
    "Conv2D": _conv, "_FusedConv2D": _conv, "Conv3D": _conv,
    "Conv2DBackpropInput": _conv_backprop_input,
    "Conv3DBackpropInputV2": _conv_backprop_input,
    "Conv2DBackpropFilter": _conv_backprop_filter,
    "Conv3DBackpropFilterV2": _conv_backprop_filter,
    "DepthwiseConv2dNative": _depthwise,
    "DepthwiseConv2dNativeBackpropInput": _depthwise_backprop_input,
    "DepthwiseConv2dNativeBackpropFilter": _depthwise_backprop_filter,
    "MaxPool": _pool, "AvgPool": _pool, "MaxPoolV2": _pool,
    "MaxPool3D": _pool, "AvgPool3D": _pool,
    "MaxPoolGrad": _pool_grad, "AvgPoolGrad": _pool_grad,
    "MaxPool3DGrad": _pool_grad, "AvgPool3DGrad": _pool_grad,
}
