"""The nodes TensorFlow runs for a While loop, mapped to its body rows.

A session lowers a functional While op to the loop frame of TF1 control
flow before it runs the step, so a traced step names no While, but the
nodes of its lowering (seen in keras_lstm's traced steps, TF 2.x):

  * body and condition ops: "<While>/body/_N/<path>" and
    "<While>/cond/_N/<path>", where "<path>" is the op's name inside the
    function (a name the inlining made unique may end in "_0");
  * the frame: "<While>/merge/_N", "<While>/<input>_switch/_N",
    "<While>/enter/_N", "<While>/exit/_N", "<While>/next_iteration/_N",
    "<While>/LoopCond/_N", and Identity nodes ("<While>/loop_body_control/
    _N", "Func/<While>/body/_N/input/_M") that forward the loop variables.

The `ControlFlowCost` of the While names its body rows "<While>/<path>"
(nested loops and calls one level further, "/" between) and its frame
rows "<body path>(loop frame)" (`tfplace.graph.control_flow`). Where a
traced node maps to no row (a frame Identity, a constant the optimizer
folded), only its traced type is known.
"""

import re
from typing import Mapping, Optional

from tfplace.graph.op_graph import (BodyOp, ControlFlowCost, LOOP_FRAME,
                                   LOOP_FRAME_OPS)

_FUNCTION_SEGMENT = re.compile(r"/(?:body|cond)/_\d+/")


def loop_of(node_name: str, loops: Mapping[str, object]) -> Optional[str]:
  """The name of the loop of `loops` (by name) whose lowering ran
  `node_name` (the longest name that prefixes it), or None."""
  best = None
  for prefix in (node_name, node_name[len("Func/"):]
                 if node_name.startswith("Func/") else None):
    if prefix is None:
      continue
    for loop in loops:
      if prefix.startswith(loop + "/") and (best is None
                                            or len(loop) > len(best)):
        best = loop
  return best


def body_row(node_name: str, op_type: str,
             body: ControlFlowCost) -> Optional[BodyOp]:
  """The row of `body` that the traced node `node_name` of type `op_type`
  (its traced type; a kernel's name such as "_MklMatMul" is matched on
  its name alone) executes, or None.

  A frame node maps to the frame row of its type in the innermost loop
  whose path it lies under; any other node to the row of its path with
  the function segments taken out, or with the inlining's "_0" suffix
  taken off too.
  """
  path = _FUNCTION_SEGMENT.sub("/", node_name)
  if op_type in LOOP_FRAME_OPS:
    best, longest = None, -1
    for row in body.ops:
      if row.type != op_type or not row.name.endswith(LOOP_FRAME):
        continue
      prefix = row.name[:-len(LOOP_FRAME)]
      if path.startswith(prefix) and len(prefix) > longest:
        best, longest = row, len(prefix)
    return best
  candidates = [path]
  if path.endswith("_0"):
    candidates.append(path[:-2])
  for name in candidates:
    for row in body.ops:
      if row.name == name:
        return row
  return None
