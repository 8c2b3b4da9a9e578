"""A traced function's captures and arguments, made part of its graph.

`freeze_inputs` turns the input placeholders of a function's graph
(`tfplace.graph.importers_function`) into what a standalone graph needs:
  * a captured variable handle becomes a VarHandleOp variable, initialized
    from the variable's current value by the `init` op; beyond
    `MAX_EMBEDDED_WEIGHT_BYTES` of variable values (a GraphDef is a
    protobuf message of at most 2 GB), from random values of its shape;
  * a captured lookup table (a Keras `TextVectorization` or `StringLookup`
    layer's vocabulary) becomes a MutableHashTableV2 that `init` fills with
    the table's current keys and values;
  * other captured tensors and the function's arguments become Consts.
"""

from typing import Dict, List

import numpy as np
from absl import logging

from tfplace.errors import GraphImportError

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


def freeze_inputs(graph_def, concrete, args, init_name: str,
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
  dtypes = {}
  for op in placeholder.consumers():
    attrs = _TABLE_DTYPE_ATTRS.get(op.type)
    if attrs and op.inputs[0] is placeholder:
      dtypes.update({k: op.get_attr(a) for k, a in zip(("key", "value"),
                                                        attrs) if a})
  if set(dtypes) != {"key", "value"}:
    raise GraphImportError(
        f"captured resource {name!r} is neither a tf.Variable nor a lookup "
        "table; an imported function can capture only those: give it its "
        "data as arguments (import_graph(fn, args=...)) instead of reading "
        "a captured iterator or queue")
  keys, values = tf.raw_ops.LookupTableExportV2(
      table_handle=handle, Tkeys=dtypes["key"], Tvalues=dtypes["value"])
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
  floating variable of a known shape) normal values x 0.02 of its shape."""
  from tensorflow.core.framework import node_def_pb2
  handle = node_def_pb2.NodeDef(name=name, op="VarHandleOp")
  handle.attr["dtype"].type = var.dtype.as_datatype_enum
  handle.attr["shape"].shape.CopyFrom(var.shape.as_proto())
  handle.attr["shared_name"].s = name.encode()
  handle.attr["container"].s = b""
  if (keep_value or not var.dtype.is_floating
      or not var.shape.is_fully_defined()):
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
