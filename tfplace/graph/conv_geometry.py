"""The geometry of a 2-D convolution gradient, read once at import.

A kernel's scratch memory (`tfplace.cost.scratch`) depends on the matrices
it multiplies, which the op's shapes and attributes give: the forward
convolution's output pixels, its filter's window (rows x columns x input
channels) and its output channels.
"""

import dataclasses
import math
from typing import Callable, Optional, Sequence

# The gradients whose geometry is read.
CONV_GRADIENT_OPS = ("Conv2DBackpropFilter", "Conv2DBackpropInput")


@dataclasses.dataclass(frozen=True)
class ConvGeometry:
  """One 2-D convolution as its gradients multiply it (NHWC).

  Attributes:
    batch: images per step.
    out_pixels: output rows x columns of the forward convolution.
    window: filter rows x columns x input channels.
    out_channels: the forward convolution's output channels.
    dtype_bytes: bytes per element.
  """
  batch: int
  out_pixels: int
  window: int
  out_channels: int
  dtype_bytes: int


def conv_geometry(op_type: str, in_shapes: Sequence, out_shapes: Sequence,
                  dtype_bytes: int,
                  attr: Callable[[str], object]) -> Optional[ConvGeometry]:
  """The geometry of a Conv2DBackpropFilter / Conv2DBackpropInput, or None.

  None for other ops, and where the layout is not NHWC or the convolution
  is dilated (other kernels, whose scratch was not measured).

  Args:
    op_type: TF op type.
    in_shapes / out_shapes: static shapes of the op's inputs and outputs
      (both gradients take the forward output's gradient as input 2).
    dtype_bytes: bytes per element of the op's output.
    attr: NodeDef attribute by name (None when absent).
  """
  if op_type not in CONV_GRADIENT_OPS or len(in_shapes) < 3 or not out_shapes:
    return None
  layout = attr("data_format")
  if layout not in (None, b"NHWC", "NHWC"):
    return None
  if any(int(d) != 1 for d in (attr("dilations") or ())):
    return None
  filt = out_shapes[0] if op_type == "Conv2DBackpropFilter" else in_shapes[1]
  grad = in_shapes[2]
  if len(filt) != 4 or len(grad) != 4:
    return None
  return ConvGeometry(
      batch=int(grad[0]), out_pixels=int(grad[1]) * int(grad[2]),
      window=math.prod(int(d) for d in filt[:3]),
      out_channels=int(filt[3]), dtype_bytes=int(dtype_bytes))
