"""The whole-variable copies of a resource variable in copy-on-read mode.

A resource variable that any op of the step reads or updates sparsely (a
gather or a scatter: an embedding's lookup, a sparse optimizer update)
switches to copy-on-read mode the first time that op runs, and stays in it.
From then on each dense access copies the whole variable: a ReadVariableOp
returns a fresh copy instead of the variable's buffer, and an assignment or
a dense optimizer update copies the buffer before it writes. TF does so to
keep a gather and a concurrent dense read consistent.

With Adam on an embedding (TF's and Keras's sparse update scatter into both
slots, then update the whole table densely), each step copies the table and
both slots several times. Measured in process on this project's host
(2026-12-07, WORKSPACE_NOTES.md, issue 13): a 51 MB table's ReadVariableOps
took 8-15 ms each, where a plain read takes ~1 us; a Keras transformer's
256 KB embedding reads took 12-18 us. `copied_variable_bytes` finds these
copies, so that the cost models charge them (`Op.copy_bytes`) and a
calibration fits them apart (`Op.variant` "copy_on_read").
"""

from typing import Iterator, Optional

# Ops that access a resource variable sparsely (TF calls
# EnsureSparseVariableAccess in their kernels): prefixes of their types.
SPARSE_ACCESS_PREFIXES = ("ResourceGather", "ResourceScatter",
                          "ResourceSparseApply")
# Ops that access a variable densely: in copy-on-read mode each copies it.
DENSE_ACCESS_OPS = frozenset({"ReadVariableOp", "AssignVariableOp",
                              "AssignAddVariableOp", "AssignSubVariableOp"})
DENSE_UPDATE_PREFIX = "ResourceApply"
# Ops a variable handle passes through unchanged.
_HANDLE_PASS = frozenset({"Identity"})


def copied_variable_bytes(tf_op) -> int:
  """Bytes of the variables `tf_op` copies whole per execution (0 for most
  ops): for a dense access (`DENSE_ACCESS_OPS`, dense `ResourceApply*`
  updates), the size of each variable it takes whose handle some op of the
  graph accesses sparsely (`SPARSE_ACCESS_PREFIXES`)."""
  if not (tf_op.type in DENSE_ACCESS_OPS
          or tf_op.type.startswith(DENSE_UPDATE_PREFIX)):
    return 0
  total = 0
  for k, handle in enumerate(tf_op.inputs):
    if handle.dtype.name != "resource":
      continue
    root = _handle_root(handle)
    if any(c.type.startswith(SPARSE_ACCESS_PREFIXES)
           for c in _handle_users(root)):
      total += _variable_bytes(tf_op, k, root) or 0
  return total


def _handle_root(handle):
  """The tensor that made `handle` (through Identity ops)."""
  while handle.op.type in _HANDLE_PASS and handle.op.inputs:
    handle = handle.op.inputs[0]
  return handle


def _handle_users(root) -> Iterator:
  """The ops that take `root`, directly or through Identity ops."""
  seen, todo = set(), [root]
  while todo:
    tensor = todo.pop()
    for consumer in tensor.consumers():
      if consumer.name in seen:
        continue
      seen.add(consumer.name)
      if consumer.type in _HANDLE_PASS:
        todo.extend(consumer.outputs)
      else:
        yield consumer


def _variable_bytes(tf_op, k: int, root) -> Optional[int]:
  """Bytes of the variable behind input `k` of `tf_op`: the shape the
  VarHandleOp declares, else the value read or assigned (None: unknown)."""
  import tensorflow as tf
  dtype, shape = None, None
  if root.op.type == "VarHandleOp":
    dtype = tf.as_dtype(root.op.get_attr("dtype"))
    shape = tf.TensorShape(root.op.get_attr("shape"))
  elif tf_op.type == "ReadVariableOp":
    dtype, shape = tf_op.outputs[0].dtype, tf_op.outputs[0].shape
  elif tf_op.type in DENSE_ACCESS_OPS and k == 0 and len(tf_op.inputs) > 1:
    dtype, shape = tf_op.inputs[1].dtype, tf_op.inputs[1].shape
  if dtype is None or not shape.is_fully_defined():
    return None
  return int(shape.num_elements()) * dtype.size
