"""Static trip counts of functional While loops, from their cond functions.

A loop's trip count is static when its cond function's output is (through
Identity ops):

  * a comparison `Less`/`LessEqual`/`Greater`/`GreaterEqual`/`NotEqual` (in
    either operand order) of an *induction variable* with a *static limit*;
  * a `LogicalAnd` of such terms (the smallest count wins), which is how
    `tf.while_loop(..., maximum_iterations=M)` adds `counter < M` to the
    user's condition; a constant `True` term is ignored.

An induction variable is loop variable k whose body output is `k + c` or
`k - c` (`Add`/`AddV2`/`Sub`) with a static `c` and whose initial value (the
While's input k) is static. A static value is a constant (including shapes
TensorFlow knows statically), a loop-invariant variable or function argument
whose outer value is static, a stateless op on static values (`fold`:
`StridedSlice` of a `Shape`, arithmetic, casts, ...), or the final
value of an induction variable of another loop with a known trip count: the
pattern of TensorFlow's gradient loops, which run `grad_counter <
forward_loop:0` (the forward loop's iteration counter). The caller supplies
the `induction` and `static` resolvers (`tfplace.graph.control_flow`); this
module holds the patterns and the arithmetic.
"""

import dataclasses
import math
from typing import Callable, Optional, Tuple

import numpy as np

IDENTITY_OPS = frozenset({"Identity", "StopGradient", "Snapshot",
                          "PreventGradient", "CheckNumerics"})
COMPARISONS = frozenset({"Less", "LessEqual", "Greater", "GreaterEqual",
                         "NotEqual"})
# `limit OP i` is `i MIRROR[OP] limit`.
_MIRROR = {"Less": "Greater", "LessEqual": "GreaterEqual", "Greater": "Less",
           "GreaterEqual": "LessEqual", "NotEqual": "NotEqual"}
_SYMBOL = {"Less": "<", "LessEqual": "<=", "Greater": ">",
           "GreaterEqual": ">=", "NotEqual": "!="}
# Ops folded by `fold` only when their inputs are this small (elements).
_FOLD_MAX_ELEMENTS = 4096


@dataclasses.dataclass(frozen=True)
class Induction:
  """A loop variable that starts at `init` and changes by `step` per trip."""
  init: float
  step: float


# (trip count or None, what was recognised or why not).
Bound = Tuple[Optional[int], str]
InductionOf = Callable[[object], Optional[Induction]]
StaticOf = Callable[[object], Optional[np.ndarray]]


def through_identity(tensor):
  """The tensor an Identity chain (Identity, IdentityN, ...) forwards."""
  while True:
    op = tensor.op
    if op.type in IDENTITY_OPS and op.inputs:
      tensor = op.inputs[0]
    elif op.type == "IdentityN":
      tensor = op.inputs[tensor.value_index]
    else:
      return tensor


def loop_step(body_output, arg) -> Optional[Tuple[float, object]]:
  """(sign, step tensor) if `body_output` is `arg + step` or `arg - step`."""
  t = through_identity(body_output)
  op = t.op
  if op.type not in ("Add", "AddV2", "Sub") or len(op.inputs) != 2:
    return None
  a, b = (through_identity(x) for x in op.inputs)
  if a is arg:
    return (-1.0 if op.type == "Sub" else 1.0), op.inputs[1]
  if b is arg and op.type != "Sub":
    return 1.0, op.inputs[0]
  return None


def count(comparison: str, ind: Induction, limit: float) -> Optional[int]:
  """Trips of `while i <comparison> limit: i += step` from i = init.

  Returns:
    The number of iterations, or None if the loop never ends.
  """
  a, s, n = float(ind.init), float(ind.step), float(limit)
  if comparison == "NotEqual":
    if s == 0:
      return 0 if a == n else None
    trips = (n - a) / s
    return int(trips) if trips >= 0 and trips == int(trips) else None
  upward = comparison in ("Less", "LessEqual")
  strict = comparison in ("Less", "Greater")
  gap = (n - a) if upward else (a - n)
  if gap < 0 or (strict and gap == 0):
    return 0
  speed = s if upward else -s
  if speed <= 0:
    return None
  if strict:
    return int(math.ceil(gap / speed))
  return int(math.floor(gap / speed)) + 1


def bound(cond_output, induction: InductionOf, static: StaticOf) -> Bound:
  """The trip count a cond function's output implies (see module doc)."""
  t = through_identity(cond_output)
  value = static(t)
  if value is not None:
    return (None, "its condition is always true") if np.all(value) else (
        0, "static: its condition is always false")
  op = t.op
  if op.type == "LogicalAnd":
    return _and(op, induction, static)
  if op.type not in COMPARISONS:
    return None, (f"its condition is computed by {op.name!r} ({op.type}), "
                  "not a counter compared with a static limit")
  for cmp, var, lim in ((op.type, op.inputs[0], op.inputs[1]),
                        (_MIRROR[op.type], op.inputs[1], op.inputs[0])):
    ind = induction(var)
    limit = static(lim) if ind is not None else None
    if ind is not None and limit is not None and np.size(limit) == 1:
      trips = count(cmp, ind, float(np.reshape(limit, ())))
      if trips is None:
        return None, f"its condition {op.name!r} never becomes false"
      return trips, (f"static: counter {ind.init:g}, {ind.step:+g} per trip, "
                     f"while {_SYMBOL[cmp]} {float(np.reshape(limit, ())):g} "
                     f"({op.name})")
  return None, (f"its condition {op.name!r} ({op.type}) does not compare a "
                "counter with a limit known before the loop runs")


def _and(op, induction: InductionOf, static: StaticOf) -> Bound:
  terms = []
  for x in op.inputs:
    value = static(through_identity(x))
    if value is not None and np.all(value):
      continue
    terms.append(bound(x, induction, static))
  known = [t for t in terms if t[0] is not None]
  if not terms or len(known) < len(terms):
    return next((t for t in terms if t[0] is None),
                (None, "its condition is always true"))
  return min(known)


def fold(op, values) -> Optional[np.ndarray]:
  """Runs stateless `op` on the static values of its inputs (constant folding).

  Returns:
    The value of `op`'s output 0, or None if the op is stateful, has control
    inputs only, its inputs are large, or TensorFlow cannot run it.
  """
  import tensorflow as tf
  if (op.op_def.is_stateful or not op.inputs or len(values) != len(op.inputs)
      or any(np.size(v) > _FOLD_MAX_ELEMENTS for v in values)):
    return None
  graph_def = tf.compat.v1.GraphDef()
  for k, (t, v) in enumerate(zip(op.inputs, values)):
    const = graph_def.node.add(name=f"in{k}", op="Const")
    const.attr["dtype"].type = t.dtype.as_datatype_enum
    const.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(v, t.dtype))
  node = graph_def.node.add()
  node.CopyFrom(op.node_def)
  node.name, node.device = "op", ""
  del node.input[:]
  node.input.extend(f"in{k}" for k in range(len(values)))
  graph = tf.Graph()
  try:
    with graph.as_default():
      tf.graph_util.import_graph_def(graph_def, name="")
    with tf.compat.v1.Session(graph=graph) as session:
      return np.asarray(session.run("op:0"))
  except (ValueError, TypeError, tf.errors.OpError):
    return None
