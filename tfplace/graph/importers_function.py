"""tf.function / ConcreteFunction -> a standalone graph-mode training step.

The function's graph is made placeable and runnable on its own:
  * every (Stateful)PartitionedCall of a library function is inlined (our own
    inliner, repeated until no call is left), so the ops inside can be placed;
    functional control flow (While/If/Case) stays one op, placed whole and
    costed from its bodies (`tfplace.graph.control_flow`);
  * captured variable handles (resource placeholders) become VarHandleOp
    variables, initialized from the variables' current values by an `init`
    op (beyond `MAX_EMBEDDED_WEIGHT_BYTES` of them, from random values of
    the same shapes: a GraphDef cannot exceed protobuf's 2 GB); captured
    lookup tables (a Keras `TextVectorization` or `StringLookup`
    layer's vocabulary) become MutableHashTableV2 tables that the `init` op
    fills with the table's current keys and values; other captured tensors
    and the function's arguments become Consts.
"""

from typing import Dict, List, Optional, Sequence

import numpy as np
from absl import logging

from tfplace.errors import GraphImportError
from tfplace.graph.op_graph import OpGraph

_CALL_OPS = ("PartitionedCall", "StatefulPartitionedCall")
# The most variable bytes whose values an imported graph carries as Consts:
# a GraphDef is a protobuf message, which cannot exceed 2 GB (a 2.15 GB model
# failed to import with "Wire format was corrupt"). Above it the variables
# start from random values (the step's time does not depend on them).
MAX_EMBEDDED_WEIGHT_BYTES = 1 << 30


def embeds_weights(num_bytes: int, what: str) -> bool:
  """True if `num_bytes` of variable values fit in an imported graph; else
  False, with a warning naming `what`."""
  if num_bytes <= MAX_EMBEDDED_WEIGHT_BYTES:
    return True
  logging.warning(
      "%s: its variables hold %.2f GB, more than the %.2f GB of values an "
      "imported graph carries (a GraphDef cannot exceed 2 GB): the imported "
      "step starts them from random values of the same shapes (step times "
      "and placements do not depend on them)", what, num_bytes / 1e9,
      MAX_EMBEDDED_WEIGHT_BYTES / 1e9)
  return False
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
  _freeze_inputs(graph_def, concrete, args, init_name, unknown_dim, seed,
                 name)
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


# ---- captures and arguments -------------------------------------------------


def _freeze_inputs(graph_def, concrete, args, init_name: str,
                   unknown_dim: int, seed: int, name: str) -> None:
  """Turns the function's input placeholders into variables and Consts."""
  captures = list(concrete.graph.captures)
  inputs = list(concrete.graph.inputs)
  arg_tensors = inputs[:len(inputs) - len(captures)]
  replacement: Dict[str, List[object]] = {}
  assigns: List[str] = []
  variables = list(concrete.graph.variables)
  keep_values = embeds_weights(
      sum(v.shape.num_elements() * v.dtype.size for v in variables
          if v.shape.is_fully_defined()), name)
  for external, internal in captures:
    ph = internal.op.name
    if internal.dtype.name == "resource":
      var = next((v for v in variables if v.handle is external), None)
      if var is not None:
        replacement[ph] = _variable_nodes(ph, var, keep_values)
      else:
        replacement[ph] = _table_nodes(ph, external, internal)
      assigns.append(replacement[ph][-1].name)
    else:
      replacement[ph] = [_const_node(ph, np.asarray(external.numpy()))]
  flat_args = _argument_values(arg_tensors, args, unknown_dim, seed)
  for tensor, value in zip(arg_tensors, flat_args):
    replacement[tensor.op.name] = [_const_node(tensor.op.name, value)]
  nodes = list(graph_def.node)
  del graph_def.node[:]
  for node in nodes:
    graph_def.node.extend(replacement.get(node.name, [node]))
  from tensorflow.core.framework import node_def_pb2
  init = node_def_pb2.NodeDef(name=init_name, op="NoOp")
  init.input.extend("^" + a for a in assigns)
  graph_def.node.append(init)


def _argument_values(arg_tensors, args, unknown_dim: int, seed: int):
  import tensorflow as tf
  if args is not None:
    flat = [np.asarray(a) for a in tf.nest.flatten(args)]
    if len(flat) != len(arg_tensors):
      raise GraphImportError(f"the function takes {len(arg_tensors)} tensor "
                             f"argument(s), got {len(flat)}")
    return flat
  rng = np.random.RandomState(seed)
  values = []
  for t in arg_tensors:
    shape = [unknown_dim if d is None else d for d in t.shape.as_list()]
    if t.dtype.is_floating:
      values.append(rng.randn(*shape).astype(t.dtype.as_numpy_dtype))
    else:
      values.append(rng.randint(0, 2, size=shape).astype(
          t.dtype.as_numpy_dtype))
  return values


def _const_node(name: str, value: np.ndarray):
  import tensorflow as tf
  from tensorflow.core.framework import node_def_pb2
  node = node_def_pb2.NodeDef(name=name, op="Const")
  proto = tf.make_tensor_proto(value)
  node.attr["dtype"].type = proto.dtype
  node.attr["value"].tensor.CopyFrom(proto)
  return node


# Ops that take a lookup table's handle and name its key and value dtypes.
_TABLE_DTYPE_ATTRS = {"LookupTableFindV2": ("Tin", "Tout"),
                      "LookupTableInsertV2": ("Tin", "Tout"),
                      "LookupTableRemoveV2": ("Tin", None),
                      "LookupTableImportV2": ("Tin", "Tout"),
                      "LookupTableExportV2": ("Tkeys", "Tvalues")}


def _table_nodes(name: str, handle, placeholder) -> List[object]:
  """MutableHashTableV2 `name`, its keys and values now as Consts and the
  LookupTableImportV2 that fills it: a captured lookup table.

  Raises:
    GraphImportError: `placeholder` is not used by a lookup op naming the
      table's key and value dtypes (not a lookup table).
  """
  import tensorflow as tf
  from tensorflow.core.framework import node_def_pb2
  from tensorflow.python.ops import gen_lookup_ops
  dtypes = {}
  for op in placeholder.graph.get_operations():
    attrs = _TABLE_DTYPE_ATTRS.get(op.type)
    if attrs and op.inputs and op.inputs[0] is placeholder:
      dtypes.update({k: op.get_attr(a) for k, a in zip(("key", "value"),
                                                        attrs) if a})
  if set(dtypes) != {"key", "value"}:
    raise GraphImportError(
        f"captured resource {name!r} is neither a tf.Variable nor a lookup "
        "table; an imported function can capture only those")
  keys, values = gen_lookup_ops.lookup_table_export_v2(
      handle, dtypes["key"], dtypes["value"])
  table = node_def_pb2.NodeDef(name=name, op="MutableHashTableV2")
  table.attr["key_dtype"].type = tf.as_dtype(dtypes["key"]).as_datatype_enum
  table.attr["value_dtype"].type = tf.as_dtype(
      dtypes["value"]).as_datatype_enum
  table.attr["shared_name"].s = name.encode()
  table.attr["container"].s = b""
  table.attr["use_node_name_sharing"].b = False
  key_node = _const_node(f"{name}/keys", keys.numpy())
  value_node = _const_node(f"{name}/values", values.numpy())
  fill = node_def_pb2.NodeDef(name=f"{name}/Import", op="LookupTableImportV2",
                              input=[name, key_node.name, value_node.name])
  fill.attr["Tin"].type = table.attr["key_dtype"].type
  fill.attr["Tout"].type = table.attr["value_dtype"].type
  return [table, key_node, value_node, fill]


def _variable_nodes(name: str, var, keep_value: bool = True
                    ) -> List[object]:
  """VarHandleOp `name`, its initial value and its AssignVariableOp; the
  initial value is the variable's value, or without `keep_value` (a
  floating variable) normal values x 0.02 of its shape."""
  from tensorflow.core.framework import node_def_pb2
  handle = node_def_pb2.NodeDef(name=name, op="VarHandleOp")
  handle.attr["dtype"].type = var.dtype.as_datatype_enum
  handle.attr["shape"].shape.CopyFrom(var.shape.as_proto())
  handle.attr["shared_name"].s = name.encode()
  handle.attr["container"].s = b""
  if keep_value or not var.dtype.is_floating:
    values = [_const_node(f"{name}/initial_value", var.numpy())]
  else:
    values = _random_value_nodes(f"{name}/initial_value", var)
  assign = node_def_pb2.NodeDef(name=f"{name}/Assign", op="AssignVariableOp",
                                input=[name, values[-1].name])
  assign.attr["dtype"].type = var.dtype.as_datatype_enum
  return [handle] + values + [assign]


def _random_value_nodes(name: str, var) -> List[object]:
  """Nodes computing normal values x 0.02 of `var`'s shape and dtype, the
  last one named `name`."""
  from tensorflow.core.framework import node_def_pb2
  shape = _const_node(f"{name}/shape",
                      np.array(var.shape.as_list(), dtype=np.int32))
  normal = node_def_pb2.NodeDef(name=f"{name}/normal",
                                op="RandomStandardNormal", input=[shape.name])
  normal.attr["dtype"].type = var.dtype.as_datatype_enum
  normal.attr["T"].type = shape.attr["dtype"].type
  scale = _const_node(f"{name}/scale",
                      np.array(0.02, dtype=var.dtype.as_numpy_dtype))
  value = node_def_pb2.NodeDef(name=name, op="Mul",
                               input=[normal.name, scale.name])
  value.attr["T"].type = var.dtype.as_datatype_enum
  return [shape, normal, scale, value]
