"""Import the step `tfplace.apply` will place: the other side of the name rule.

`import_step(fn, args, optimizers)` is `tfplace.import_graph(fn, args=...)`
(the tf.function importer: function library inlined, variables and arguments
frozen) plus one constraint TF does not record: each optimizer slot is
colocated with its variable. Keras optimizers (tf_keras 2.11+) create a slot
as a separate variable named "<slot>/<variable name>" ("m/dense/kernel") and
update it by ops of its own, so nothing in the graph ties it to its variable
and a placer could put them on different devices. The slot's VarHandleOp gets
a `_class` "loc:@<variable's VarHandleOp>" attr, as TF1 slot creators did, so
that the placement keeps a variable, its slots and their updates on one
device. Legacy optimizers ("<variable name>/<slot>") are paired too (their
fused update ops tie them already).
"""

from typing import Dict, Optional, Sequence

from absl import logging

from tfplace.apply.variables import placeholder_of


def import_step(fn, args: Optional[Sequence] = None, optimizers=(),
                name: Optional[str] = None):
  """The `OpGraph` of a step function, its optimizer slots colocated.

  Args:
    fn: a tf.function (with an input signature, or give `args`).
    args: sample arguments; their values become Consts of the graph.
    optimizers: the Keras optimizers the step uses (their slots are paired
      with the variables they belong to).
    name: graph name (default: the function's).

  Returns:
    The OpGraph.
  """
  from tfplace.graph import importers
  from tfplace.graph.importers_function import from_function
  concrete = (fn.get_concrete_function(*args) if args is not None
              else fn.get_concrete_function())
  graph = from_function(concrete, args=args, name=name)
  pairs = slot_pairs(concrete.graph, optimizers)
  if not pairs:
    return graph
  graph_def = type(graph.graph_def)()
  graph_def.CopyFrom(graph.graph_def)
  for node in graph_def.node:
    if node.name in pairs and node.op == "VarHandleOp":
      node.attr["_class"].list.s.append(f"loc:@{pairs[node.name]}".encode())
  logging.info("colocated %d optimizer slot(s) with their variables",
               len(pairs))
  fetches = graph.fetches
  return importers.from_graph_def(
      graph_def, list(fetches.train_ops), fetches.loss,
      list(fetches.init_ops), name=graph.name)


def slot_pairs(step_graph, optimizers) -> Dict[str, str]:
  """Slot placeholder -> its variable's placeholder, for the optimizers'
  slots that `step_graph` captures."""
  slots = {id(v) for opt in optimizers for v in opt.variables}
  used = list(step_graph.variables)
  primaries = {_bare(v.name): v for v in used if id(v) not in slots}
  out = {}
  for var in used:
    if id(var) not in slots:
      continue
    primary = _primary_of(_bare(var.name), primaries)
    if primary is None:
      continue
    slot_ph = placeholder_of(step_graph, var.handle)
    primary_ph = placeholder_of(step_graph, primary.handle)
    if slot_ph is not None and primary_ph is not None:
      out[slot_ph.op.name] = primary_ph.op.name
  return out


def _primary_of(slot_name: str, primaries):
  """The variable a slot named "m/<name>" (or "<name>/m") belongs to."""
  best = None
  for name, var in primaries.items():
    if (slot_name.endswith("/" + name) or slot_name.startswith(name + "/")):
      if best is None or len(name) > len(best[0]):
        best = (name, var)
  return best[1] if best else None


def _bare(name: str) -> str:
  return name.split(":")[0]
