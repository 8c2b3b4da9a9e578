"""Function bodies of functional control flow as graphs with static shapes.

A While/If/Case op names its bodies by function name (attrs `cond`/`body`,
`then_branch`/`else_branch`, `branches`); the GraphDef's function library
holds them as FunctionDefs. `function_graph` imports one into a fresh
`tf.Graph` whose arguments are placeholders with the shapes, dtypes and
handle data of the tensors the op passes in, so TensorFlow's shape inference
gives every body op its static shapes, including the element shapes of
TensorLists (the accumulators a While keeps for its gradient), which only
travel as handle data.
"""

import dataclasses
from typing import Dict, List, Optional, Sequence

# Op types whose function attrs name bodies to cost.
WHILE_OPS = frozenset({"While", "StatelessWhile"})
IF_OPS = frozenset({"If", "StatelessIf"})
CASE_OPS = frozenset({"Case", "StatelessCase"})
CALL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})
_ARG_PREFIX = "tfplace_arg_"


@dataclasses.dataclass(frozen=True)
class ArgSpec:
  """What a function argument receives.

  Attributes:
    dtype: a `tf.DType`.
    shape: a `tf.TensorShape`.
    handle_data: the handle data proto (resources, TensorLists) or None.
  """
  dtype: object
  shape: object
  handle_data: Optional[object] = None


@dataclasses.dataclass
class FunctionGraph:
  """One function body imported as a graph.

  Attributes:
    name: the function's name.
    graph: the `tf.Graph` holding it.
    args: the argument placeholders, in signature order.
    outputs: the returned tensors, in signature order.
    ops: the body's ops (argument placeholders left out), in graph order.
  """
  name: str
  graph: object
  args: List[object]
  outputs: List[object]
  ops: List[object]

  def arg_index(self, op) -> Optional[int]:
    """The argument index of placeholder `op`, or None."""
    for k, a in enumerate(self.args):
      if a.op is op:
        return k
    return None


def called_functions(node) -> List[str]:
  """Names of the functions a NodeDef's attrs refer to."""
  names = []
  for value in node.attr.values():
    if value.HasField("func"):
      names.append(value.func.name)
    names.extend(f.name for f in value.list.func)
  return names


def _reachable(name: str, library: Dict[str, object]) -> List[str]:
  """`name` and every library function it calls, transitively."""
  seen, stack = [], [name]
  while stack:
    fname = stack.pop()
    if fname in seen or fname not in library:
      continue
    seen.append(fname)
    for node in library[fname].node_def:
      stack.extend(called_functions(node))
      if node.op in library:
        stack.append(node.op)
  return seen


def _drop_outer_colocation(graph_def) -> None:
  """Removes the colocation constraints (`_class` "loc:@NODE") that name
  nodes outside the body (a Keras optimizer's update inside a `tf.cond`
  names its variable, a node of the outer graph): TensorFlow refuses to
  import them, and the body is imported only to cost it."""
  names = {n.name for n in graph_def.node}
  for node in graph_def.node:
    if "_class" not in node.attr:
      continue
    kept = [v for v in node.attr["_class"].list.s
            if v.decode().split("@", 1)[-1] in names]
    if kept:
      del node.attr["_class"].list.s[:]
      node.attr["_class"].list.s.extend(kept)
    else:
      del node.attr["_class"]


def function_graph(name: str, library: Dict[str, object],
                   specs: Sequence[ArgSpec]) -> FunctionGraph:
  """Imports library function `name` with argument `specs`.

  Args:
    name: the function's name.
    library: FunctionDefs by name (the GraphDef's library).
    specs: one per argument of the function's signature.

  Raises:
    KeyError: the function is not in the library.
    ValueError: the specs do not match the signature, or TensorFlow cannot
      import the body.
  """
  import tensorflow as tf
  from tensorflow.python.framework import function_def_to_graph
  from tensorflow.python.ops import handle_data_util
  fdef = library[name]
  inputs = list(fdef.signature.input_arg)
  if len(inputs) != len(specs):
    raise ValueError(f"function {name} takes {len(inputs)} arguments, "
                     f"{len(specs)} given")
  try:
    graph_def, flat = function_def_to_graph.function_def_to_graph_def(
        fdef, [s.shape for s in specs])
  except (TypeError, KeyError) as e:
    raise ValueError(f"cannot read function {name}: {e}") from None
  for fname in _reachable(name, library)[1:]:
    graph_def.library.function.add().CopyFrom(library[fname])
  _drop_outer_colocation(graph_def)
  graph = tf.Graph()
  with graph.as_default():
    args = []
    for k, spec in enumerate(specs):
      ph = tf.compat.v1.placeholder(spec.dtype, spec.shape,
                                    name=f"{_ARG_PREFIX}{k}")
      if spec.handle_data is not None and spec.handle_data.is_set:
        handle_data_util.set_handle_data(ph, spec.handle_data)
      args.append(ph)
    input_map = {flat[a.name]: ph for a, ph in zip(inputs, args)}
    tf.graph_util.import_graph_def(graph_def, input_map=input_map, name="")
  returned = [flat[fdef.ret[a.name]] for a in fdef.signature.output_arg]
  outputs = [input_map[r] if r in input_map else graph.get_tensor_by_name(r)
             for r in returned]
  replaced = {flat[a.name].split(":")[0] for a in inputs}
  mine = {a.op.name for a in args}
  ops = [op for op in graph.get_operations()
         if op.name not in replaced and op.name not in mine]
  return FunctionGraph(name, graph, args, outputs, ops)

