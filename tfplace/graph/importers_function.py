"""tf.function / ConcreteFunction -> a standalone graph-mode training step.

The function's graph is made placeable and runnable on its own:
  * every (Stateful)PartitionedCall of a library function is inlined (our own
    inliner, repeated until no call is left), so the ops inside can be placed;
    functional control flow (While/If/Case) stays one op, placed whole and
    costed from its bodies (`tfplace.graph.control_flow`);
  * captured variables, lookup tables and tensors and the function's
    arguments become variables, tables and Consts of the graph, set by an
    `init` op (`tfplace.graph.function_captures`).
"""

from typing import Dict, List, Optional, Sequence

from absl import logging

from tfplace.errors import GraphImportError
from tfplace.graph import function_captures
from tfplace.graph.op_graph import OpGraph

_CALL_OPS = ("PartitionedCall", "StatefulPartitionedCall")
_MAX_INLINE_DEPTH = 32


def from_function(fn_or_concrete, train_ops: Optional[Sequence[str]] = None,
                  loss: Optional[str] = None,
                  init_ops: Optional[Sequence[str]] = None,
                  name: Optional[str] = None, unknown_dim: int = 1,
                  input_signature=None, args=None, seed: int = 0,
                  loop_trip_counts=None) -> OpGraph:
  """Imports a tf.function or ConcreteFunction as a training step.

  Args:
    fn_or_concrete: a ConcreteFunction, or a tf.function with an
      input_signature (or give `input_signature` / `args`).
    train_ops: op names run per step; default: the function's outputs and
      control outputs (its stateful updates).
    loss: loss tensor name; default: the first output if a float scalar.
    init_ops: default: the added "init" op.
    name: graph name (default: the function's name).
    unknown_dim: size for unknown dimensions.
    input_signature: TensorSpecs to trace a tf.function with.
    args: sample arguments (they become Consts in the graph).
    seed: seed of the random arguments made when `args` is not given.
    loop_trip_counts: trip counts of loops that are not static (see
      `tfplace.graph.importers.import_graph`).
  """
  from tfplace.graph import importers
  concrete = _concrete(fn_or_concrete, input_signature, args)
  if name is None:
    raw = concrete.name
    name = raw.decode() if isinstance(raw, bytes) else str(raw)
  graph_def = concrete.graph.as_graph_def()
  graph_def = inline_function_calls(graph_def)
  init_name = _unique_name(graph_def, "init")
  function_captures.freeze_inputs(graph_def, concrete, args, init_name,
                                  unknown_dim, seed, name)
  if train_ops is None:
    train_ops = [t.op.name for t in concrete.outputs]
    train_ops += [op.name for op in concrete.graph.control_outputs
                  if op.name not in train_ops]
  if loss is None and concrete.outputs:
    first = concrete.outputs[0]
    if first.shape.rank == 0 and first.dtype.is_floating:
      loss = first.name
  return importers.from_graph_def(
      graph_def, train_ops, loss,
      [init_name] if init_ops is None else init_ops, name=name,
      unknown_dim=unknown_dim, loop_trip_counts=loop_trip_counts)


def _concrete(fn, input_signature, args):
  if hasattr(fn, "function_def") and hasattr(fn, "graph"):
    return fn
  if not hasattr(fn, "get_concrete_function"):
    raise GraphImportError(f"{fn!r} is not a tf.function")
  try:
    if args is not None:
      return fn.get_concrete_function(*args)
    if input_signature is not None:
      return fn.get_concrete_function(*input_signature)
    return fn.get_concrete_function()
  except (TypeError, ValueError) as e:
    raise GraphImportError(
        "cannot trace the tf.function; give it an input_signature or pass "
        f"input_signature= or args=: {e}") from None


def _unique_name(graph_def, base: str) -> str:
  names = {n.name for n in graph_def.node}
  name, k = base, 0
  while name in names:
    k += 1
    name = f"{base}_{k}"
  return name


# ---- inlining ---------------------------------------------------------------


def inline_function_calls(graph_def):
  """Inlines every call of a library function, recursively.

  A call node `c` becomes its body with names prefixed "c/", argument
  Placeholders turned into Identity ops reading the call's inputs, and an
  IdentityN named `c` (a NoOp when there are no outputs) that forwards the
  outputs and waits on the body's control outputs, so consumers are unchanged.

  Args:
    graph_def: a GraphDef with a function library.

  Returns:
    A new GraphDef (the library is kept for While/If bodies).
  """
  library = {f.signature.name: f for f in graph_def.library.function}
  current = graph_def
  for _ in range(_MAX_INLINE_DEPTH):
    out = type(graph_def)()
    out.versions.CopyFrom(current.versions)
    out.library.CopyFrom(current.library)
    inlined = 0
    for node in current.node:
      fname = _called_function(node, library)
      if fname is None:
        out.node.add().CopyFrom(node)
      else:
        out.node.extend(_inline_call(node, library[fname]))
        inlined += 1
    current = out
    if not inlined:
      return current
    logging.info("inlined %d function call(s)", inlined)
  raise GraphImportError("function calls nest deeper than "
                         f"{_MAX_INLINE_DEPTH} levels (recursion?)")


def _called_function(node, library) -> Optional[str]:
  if node.op in _CALL_OPS and node.attr["f"].func.name in library:
    return node.attr["f"].func.name
  return node.op if node.op in library else None


def _inline_call(call, fdef) -> List[object]:
  """The NodeDefs replacing one call node."""
  from tensorflow.core.framework import node_def_pb2
  from tensorflow.python.framework import function_def_to_graph
  body, flat_names = function_def_to_graph.function_def_to_graph_def(fdef)
  prefix = call.name + "/"
  body_names = {n.name for n in body.node}
  data_inputs = [i for i in call.input if not i.startswith("^")]
  control_inputs = [i for i in call.input if i.startswith("^")]
  arg_index = {a.name: k for k, a in enumerate(fdef.signature.input_arg)}
  nodes = []
  for node in body.node:
    new = node_def_pb2.NodeDef()
    if node.op == "Placeholder" and node.name in arg_index:
      new.name, new.op = prefix + node.name, "Identity"
      new.input.append(data_inputs[arg_index[node.name]])
      new.input.extend(control_inputs)
      new.attr["T"].CopyFrom(node.attr["dtype"])
    else:
      new.CopyFrom(node)
      new.name = prefix + node.name
      del new.input[:]
      new.input.extend(_prefixed(i, prefix) for i in node.input)
      if not node.input:
        new.input.extend(control_inputs)
      _prefix_colocation(new, prefix, body_names)
    new.device = new.device or call.device
    nodes.append(new)
  nodes.append(_output_node(call, fdef, flat_names, prefix))
  return nodes


def _prefixed(inp: str, prefix: str) -> str:
  return "^" + prefix + inp[1:] if inp.startswith("^") else prefix + inp


def _prefix_colocation(node, prefix: str, body_names) -> None:
  if "_class" not in node.attr:
    return
  values = [s.decode() for s in node.attr["_class"].list.s]
  fixed = [f"loc:@{prefix}{v[5:]}" if v.startswith("loc:@") and
           v[5:] in body_names else v for v in values]
  del node.attr["_class"].list.s[:]
  node.attr["_class"].list.s.extend(v.encode() for v in fixed)


def _output_node(call, fdef, flat_names: Dict[str, str], prefix: str):
  """IdentityN (or NoOp) named like the call: outputs, after side effects."""
  from tensorflow.core.framework import node_def_pb2
  node = node_def_pb2.NodeDef(name=call.name, device=call.device)
  outputs = [flat_names.get(fdef.ret[a.name], fdef.ret[a.name])
             for a in fdef.signature.output_arg]
  controls = ["^" + prefix + fdef.control_ret[a]
              for a in fdef.signature.control_output]
  if outputs:
    node.op = "IdentityN"
    node.input.extend(prefix + o for o in outputs)
    types = (list(call.attr["Tout"].list.type) if "Tout" in call.attr else
             [a.type for a in fdef.signature.output_arg])
    node.attr["T"].list.type.extend(types)
  else:
    node.op = "NoOp"
  node.input.extend(controls)
  return node
