"""Scratch memory: bytes an op's kernel allocates while it runs and frees
before it ends.

The simulator holds an op's scratch on its device from the op's start to its
end (`OpCosts.scratch_bytes`), on top of the tensors that are alive.

What is modelled, each measured on TensorFlow 2.21's own CPU kernels
(per-op `peak_bytes` less the outputs' bytes in traced steps, with the BFC
CPU allocator, 1 and 2 intra-op threads, 134 shapes: every filter
gradient's buffer to the byte; the input gradients' scratch exact on 107,
never under the model, over it by 3.4x at most, on buffers under 400 KB):

- `Conv2DBackpropFilter` on a CPU lays the input's patches out as a matrix
  (rows of `window` values, one row per output pixel) for as many images as
  make the product's three matrices fill a 30 MiB working set, whatever the
  batch (0.7-35 MB over the shapes measured, tiny convolutions included).
- `Conv2DBackpropInput` on a CPU does the same, except when it has one image
  or enough work per thread (256 KiB of matrices per intra-op thread), where
  it multiplies one image at a time into one image's patch matrix.

Left out: GPU convolutions' cuDNN workspaces (chosen by TF's autotuner; 91 KB
on the one H200 record of small_cnn), oneDNN's CPU kernels (used where TF
enables them: `TF_ENABLE_ONEDNN_OPTS`, on by default on CPUs with
AVX512_VNNI or newer, where a one-core worker's traced convolution
gradients show no scratch in the allocator's peaks: a device whose
`conv_grad_buffers` a cluster benchmark found false gets none), depthwise
gradients (up to ~100 KiB
measured), the packing buffers of Eigen's multi-threaded contractions (a
Conv2D with two threads took 40 MB once), and the copy TF makes of a
variable that an update op writes while a read still holds it.
"""

import numpy as np

from tfplace.cost.cluster import Cluster, Device
from tfplace.graph.conv_geometry import ConvGeometry
from tfplace.graph.op_graph import OpGraph, allocated_bytes

# The working set TF's CPU convolution gradients size their patch buffers
# for (TF's assumed L3 cache).
CPU_WORKING_SET_BYTES = 30 << 20
# Matrix bytes per intra-op thread above which the CPU input gradient
# multiplies one image at a time (TF's assumed L2 cache).
CPU_THREAD_WORK_BYTES = 256 << 10


def _per_image(conv: ConvGeometry):
  """(patch-matrix elements, elements of all three matrices) of one image."""
  patches = conv.out_pixels * conv.window
  return patches, patches + conv.out_channels * (conv.window + conv.out_pixels)


def _images_in_working_set(conv: ConvGeometry, work: int) -> int:
  return -(-(CPU_WORKING_SET_BYTES // conv.dtype_bytes) // work)


def cpu_filter_gradient_scratch(conv: ConvGeometry) -> int:
  """Bytes of a CPU Conv2DBackpropFilter's patch buffer."""
  patches, work = _per_image(conv)
  images = _images_in_working_set(conv, work)
  return allocated_bytes(images * patches * conv.dtype_bytes)


def cpu_input_gradient_scratch(conv: ConvGeometry, threads: int) -> int:
  """Bytes of a CPU Conv2DBackpropInput's patch buffer with `threads`
  intra-op threads."""
  patches, work = _per_image(conv)
  one_at_a_time = conv.batch == 1 or (
      work // max(1, threads) >= CPU_THREAD_WORK_BYTES // conv.dtype_bytes)
  images = 1 if one_at_a_time else _images_in_working_set(conv, work)
  return allocated_bytes(images * patches * conv.dtype_bytes)


def op_scratch_bytes(op_type: str, conv: ConvGeometry, device: Device) -> int:
  """Scratch bytes of one op on one device (0 where none is modelled).

  A CPU device's intra-op threads are taken to be its `slots` (the cores a
  tfplace worker gives both of TF's thread pools).
  """
  if (conv is None or conv.dtype_bytes <= 0 or device.type != "CPU"
      or not device.conv_grad_buffers):
    return 0
  if op_type == "Conv2DBackpropFilter":
    return cpu_filter_gradient_scratch(conv)
  if op_type == "Conv2DBackpropInput":
    return cpu_input_gradient_scratch(conv, device.slots)
  return 0


def scratch_bytes(graph: OpGraph, cluster: Cluster) -> np.ndarray:
  """int64 [M, D]: each op's scratch bytes on each device."""
  out = np.zeros((graph.num_ops, cluster.num_devices), dtype=np.int64)
  for i, op in enumerate(graph.ops):
    if op.conv is None:
      continue
    for j, device in enumerate(cluster.devices):
      out[i, j] = op_scratch_bytes(op.type, op.conv, device)
  return out
