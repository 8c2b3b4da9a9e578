"""Dimensions static shape inference leaves unknown, and the one warning.

An unknown dimension is costed as the importer's `unknown_dim` (1 by
default). The user is warned once, naming the first such tensor. While a
graph is imported, the tensors are only noted (`noted`); the importer then
warns about those the training step runs (`warn_for_step`): a TF1 graph's
save/restore ops (RestoreV2's outputs have no static shape) cost nothing in
a step and are no reason to tell the user to give a batch size.
"""

import contextlib
from typing import Collection, Iterator, List, Optional

from absl import logging

_warned = [False]
# The lists open `noted` blocks append to (innermost last).
_open: List[List[object]] = []


def note(tensor) -> None:
  """A tensor (or None: a variable's declared shape) has an unknown
  dimension: noted in the innermost open `noted` block, else warned of."""
  if _open:
    _open[-1].append(tensor)
  else:
    warn(tensor)


@contextlib.contextmanager
def noted() -> Iterator[List[object]]:
  """Collects what `note` is told inside the block (no warning)."""
  found: List[object] = []
  _open.append(found)
  try:
    yield found
  finally:
    _open.pop()


def warn_for_step(tensors: List[object], graph,
                  step_op_names: Collection[str]) -> None:
  """Warns of the first noted tensor a training step runs.

  Args:
    tensors: what `noted` collected while `graph` was read.
    graph: the imported `tf.Graph`; a tensor of another graph (a function
      body of a control-flow op) counts as the step's.
    step_op_names: names of the ops one step runs.
  """
  for tensor in tensors:
    if (tensor is None or tensor.op.graph is not graph
        or tensor.op.name in step_op_names):
      warn(tensor)
      return


def warn(tensor: Optional[object]) -> None:
  """The warning, once per process."""
  if _warned[0]:
    return
  _warned[0] = True
  first = (f" (the first: {tensor.name} ({tensor.op.type}))"
           if tensor is not None else "")
  logging.warning(
      "some tensor shapes have unknown dimensions%s: they are costed as "
      "`unknown_dim` (default 1). Where a placeholder's batch dimension is "
      "unknown, give the batch size (--batch_size N, or "
      "import_graph(..., batch_size=N)) or the placeholders' shapes "
      "(--input_shapes, input_shapes=); sizes that depend on the data "
      "(Unique, Where, a sparse gradient's rows) stay unknown", first)
