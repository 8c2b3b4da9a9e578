"""Finding a training step's loss when nobody named it.

A TF1 graph names its loss in the "losses" collection only when it was
made with `tf.compat.v1.losses.*`; a hand-written one
(`tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(...))`) is an
op named "Mean", and `graph.fetches.loss` was None, so the README's TF1
snippet, `sess.run([graph.fetches.loss, *graph.fetches.train_ops])`, failed
in TensorFlow with "Fetch argument None has invalid type". `detect_loss`
looks, in order, for:

  1. the one scalar float op whose name ends with "loss" (as before);
  2. the one scalar float op the gradients start from: `tf.gradients`
     (and so every TF1 optimizer's `minimize`) seeds the gradient of each
     y with a Fill named "<scope>/grad_ys_<k>", consumed by the ops of y's
     own gradient, "<scope>/<y's op>_grad/...".

Neither found, `say_none_found` says how to give it (`loss=`).
"""

import re
from typing import Optional, Sequence

from absl import logging

from tfplace.graph.op_graph import Edge, Op

_GRAD_YS = re.compile(r"^(.*)/grad_ys_\d+$")
_FLOATS = ("float", "half", "bfloat")


def _scalar_float(op: Op) -> bool:
  return bool(op.output_shapes) and op.output_shapes[0] == () and (
      op.output_dtypes[0].startswith(_FLOATS))


def detect_loss(ops: Sequence[Op], edges: Sequence[Edge]) -> Optional[str]:
  """The step's loss tensor name ("op:0"), or None (see the module
  docstring)."""
  by_name = [op.name for op in ops
             if op.name.lower().endswith("loss") and _scalar_float(op)]
  if len(by_name) == 1:
    return by_name[0] + ":0"
  seeded = gradient_seeds(ops, edges)
  if len(seeded) == 1:
    return seeded[0] + ":0"
  if len(by_name) > 1:
    logging.warning("several candidate losses (%s); give loss=", by_name[:3])
  return None


def say_none_found(ops: Sequence[Op], edges: Sequence[Edge],
                   name: str) -> None:
  """Logs that `detect_loss` found no loss: a warning where the graph
  takes gradients (of several scalars, or of none), else at INFO (a graph
  without gradients is no training step to fetch a loss from)."""
  seeded = gradient_seeds(ops, edges)
  log = logging.warning if _seed_scopes(ops) else logging.info
  log("%s: no loss found (no \"losses\" collection, no scalar float op "
      "named ...loss, %s): fetches.loss is None; give loss=\"NAME:0\" to "
      "import_graph", name,
      f"the gradients start from {len(seeded)}: {', '.join(seeded[:3])}"
      if len(seeded) > 1 else "no one scalar the gradients start from")


def _seed_scopes(ops: Sequence[Op]) -> dict:
  """op id -> "<scope>/" of each Fill that seeds a gradient."""
  return {i: m.group(1) + "/" for i, m in (
      (i, _GRAD_YS.match(op.name)) for i, op in enumerate(ops)
      if op.type == "Fill") if m is not None}


def gradient_seeds(ops: Sequence[Op], edges: Sequence[Edge]) -> list:
  """Names of the scalar float ops whose gradients `tf.gradients` seeded
  (each once, in graph order)."""
  scopes = _seed_scopes(ops)
  if not scopes:
    return []
  index = {op.name: i for i, op in enumerate(ops)}
  found = set()
  for edge in edges:
    scope = scopes.get(edge.src)
    if scope is None:
      continue
    consumer = ops[edge.dst].name
    if not consumer.startswith(scope):
      continue
    rest = consumer[len(scope):]
    for cut in (m.start() for m in re.finditer("_grad/", rest)):
      y = index.get(rest[:cut])
      if y is not None and _scalar_float(ops[y]):
        found.add(y)
  return [ops[i].name for i in sorted(found)]
