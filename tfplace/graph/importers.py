"""Importers: every TensorFlow input form -> `OpGraph`.

Every form is reduced to a GraphDef, imported into a fresh `tf.Graph`, and
read op by op from the `tf.Operation` objects (static shape inference gives
shapes and dtypes). tf.function and Keras inputs are first turned into a
standalone graph-mode training step (see `importers_function` and
`importers_keras`).
"""

import os
from typing import List, Mapping, Optional, Sequence

import numpy as np
from absl import logging

from tfplace.errors import GraphImportError
from tfplace.graph import colocation, control_flow, graph_io
from tfplace.graph import importers_keras, keras_files, unknown_dims
from tfplace.graph import input_shapes as input_shapes_lib
from tfplace.graph.op_graph import (VARIABLE_OPS, Edge, Op, OpGraph,
                                    StepFetches)
from tfplace.graph.op_reader import read_op
from tfplace.graph.step_loss import detect_loss, say_none_found

LoopTripCounts = Optional[Mapping[str, int]]


def import_graph(source, *, train_ops=None, loss=None, init_ops=None,
                 name: Optional[str] = None, unknown_dim: int = 1,
                 loop_trip_counts: LoopTripCounts = None,
                 batch_size: Optional[int] = None,
                 input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
                 **keras_kwargs) -> OpGraph:
  """Imports any supported TensorFlow form as an `OpGraph`.

  Args:
    source: a `tf.Graph`; a GraphDef or MetaGraphDef; a path to a .pb,
      .pbtxt or .meta file; a `tf.function` or ConcreteFunction; a Keras
      (tf_keras) model, or the path of a saved one (.keras, .h5, .hdf5 or
      a SavedModel folder; its compiled loss and optimizer unless given).
    train_ops: the ops that perform the update, as names, `tf.Operation`s
      or `tf.Tensor`s of the graph (detected if None).
    loss: the loss tensor or op, or its name (detected if None). For a
      Keras model, the loss function (name or callable; default: the one it
      was compiled with).
    init_ops: the ops that initialize variables, given like train_ops
      (detected if None).
    name: a human name for the graph.
    unknown_dim: size given to dimensions static shape inference leaves
      unknown.
    loop_trip_counts: {While op name: trip count} for loops whose trip count
      the graph does not make static (see `tfplace.graph.control_flow`; a
      loop nested in another's body is "outer/inner").
    batch_size: an integer >= 1: for a graph, the size of its
      placeholders' unknown first dimension (written into the placeholders,
      so costs and the placed GraphDef are at this batch; see
      `input_shapes.set_input_shapes`); for a Keras model, the batch of the
      data it trains on (default 32).
    input_shapes: for a graph, placeholder name -> full shape.
    **keras_kwargs: for Keras: `optimizer` (default: the one the model was
      compiled with, else SGD), `x`, `y`, `seed`;
      for a tf.function: `input_signature` or `args`.

  Returns:
    The OpGraph.

  Raises:
    GraphImportError: the source cannot be read as a training graph.
  """
  import tensorflow as tf
  from tensorflow.core.framework import graph_pb2
  from tensorflow.core.protobuf import meta_graph_pb2
  if batch_size is not None:
    if isinstance(batch_size, bool) or not isinstance(batch_size,
                                                      (int, np.integer)):
      raise GraphImportError(
          f"batch_size must be an integer, got {batch_size!r}")
    if batch_size < 1:
      raise GraphImportError(f"batch_size must be >= 1, got {batch_size}")
  train_ops = _op_names(train_ops, "train_ops")
  init_ops = _op_names(init_ops, "init_ops")
  if isinstance(loss, (tf.Tensor, tf.Operation)):
    loss = loss.name
  common = dict(train_ops=train_ops, init_ops=init_ops,
                unknown_dim=unknown_dim, loop_trip_counts=loop_trip_counts)
  if isinstance(source, (str, os.PathLike)):
    path = os.fspath(source)
    if keras_files.is_saved_keras_path(path):
      source = keras_files.load_saved_model(path, needs_loss=loss is None)
      name = name or os.path.splitext(
          os.path.basename(os.path.normpath(path)))[0]
    else:
      graph_def, meta = graph_io.read_graph_file(path)
      name = name or os.path.basename(path).split(".")[0]
      source = meta if meta is not None else graph_def
  if isinstance(source, (tf.Graph, graph_pb2.GraphDef,
                         meta_graph_pb2.MetaGraphDef)):
    if keras_kwargs:
      raise GraphImportError(f"unexpected arguments {sorted(keras_kwargs)} "
                             f"for a {type(source).__name__} source")
    return _from_graph_source(source, loss, name or "graph", batch_size,
                              input_shapes, common)
  if hasattr(source, "get_weights") and hasattr(source, "compile"):
    if input_shapes:
      raise GraphImportError("input_shapes is for a graph's placeholders; a "
                             "Keras model takes batch_size, x and y")
    if batch_size is not None:
      keras_kwargs["batch_size"] = batch_size
    return from_keras(source, loss=loss, name=name or source.name,
                      unknown_dim=unknown_dim,
                      loop_trip_counts=loop_trip_counts, **keras_kwargs)
  if hasattr(source, "get_concrete_function") or hasattr(source,
                                                         "function_def"):
    if batch_size is not None or input_shapes:
      raise GraphImportError(
          "batch_size/input_shapes set a graph's placeholder shapes; give a "
          "tf.function an input_signature or args instead")
    return from_function(source, loss=loss, name=name, **common,
                         **keras_kwargs)
  raise GraphImportError(
      f"cannot import a {type(source).__name__}: expected a tf.Graph, "
      "GraphDef, MetaGraphDef, graph file path, tf.function, "
      "ConcreteFunction or Keras model")


def _from_graph_source(source, loss, name: str, batch_size, input_shapes,
                       common) -> OpGraph:
  """Imports a tf.Graph, GraphDef or MetaGraphDef, its placeholders' shapes
  set first when batch_size or input_shapes is given."""
  import tensorflow as tf
  from tensorflow.core.protobuf import meta_graph_pb2
  train_ops = common["train_ops"]
  if isinstance(source, tf.Graph):
    if train_ops is None and source.get_collection("train_op"):
      common["train_ops"] = [_op_name(getattr(t, "name", str(t)))
                             for t in source.get_collection("train_op")]
    if batch_size is None and not input_shapes:
      return from_tf_graph(source, loss=loss, name=name, **common)
    source = source.as_graph_def()
  source = _with_input_shapes(source, batch_size, input_shapes, name)
  if isinstance(source, meta_graph_pb2.MetaGraphDef):
    common = dict(common)
    common.pop("train_ops")
    return from_meta_graph(source, train_op=train_ops, loss=loss, name=name,
                           **common)
  return from_graph_def(source, loss=loss, name=name, **common)


def _with_input_shapes(source, batch_size, input_shapes, name: str):
  """A GraphDef or MetaGraphDef with its placeholders' shapes set."""
  if batch_size is None and not input_shapes:
    return source
  if not hasattr(source, "graph_def"):  # A GraphDef.
    return input_shapes_lib.set_input_shapes(source, batch_size,
                                             input_shapes, name)
  shaped = input_shapes_lib.set_input_shapes(source.graph_def, batch_size,
                                             input_shapes, name)
  meta = type(source)()
  meta.CopyFrom(source)
  meta.graph_def.CopyFrom(shaped)
  return meta


def from_function(fn_or_concrete, **kwargs) -> OpGraph:
  """Imports a tf.function / ConcreteFunction; see `importers_function`."""
  from tfplace.graph import importers_function
  return importers_function.from_function(fn_or_concrete, **kwargs)


def from_keras(model, loss=None, optimizer=None, batch_size: int = 32,
               x=None, y=None, **kwargs) -> OpGraph:
  """Imports a Keras model's training step; see `importers_keras`."""
  from tfplace.graph import importers_keras, keras_files, unknown_dims
  return importers_keras.from_keras(model, loss, optimizer=optimizer,
                                    batch_size=batch_size, x=x, y=y, **kwargs)


def from_graph_def(graph_def, train_ops: Optional[Sequence[str]] = None,
                   loss: Optional[str] = None,
                   init_ops: Optional[Sequence[str]] = None,
                   name: str = "graph", unknown_dim: int = 1,
                   loop_trip_counts: LoopTripCounts = None) -> OpGraph:
  """Imports a GraphDef (train ops, loss, init detected when not given)."""
  import tensorflow as tf
  if not graph_def.node:
    raise GraphImportError(f"{name}: the graph is empty (no ops)")
  graph = tf.Graph()
  with graph.as_default():
    try:
      tf.compat.v1.import_graph_def(graph_def, name="")
    except (ValueError, TypeError, KeyError, tf.errors.OpError) as e:
      raise GraphImportError(f"{name}: TensorFlow cannot import the "
                             f"GraphDef: {e}") from None
  return from_tf_graph(graph, train_ops, loss, init_ops, name=name,
                       unknown_dim=unknown_dim,
                       loop_trip_counts=loop_trip_counts)


def from_meta_graph(meta_graph_def, train_op=None, loss: Optional[str] = None,
                    init_ops: Optional[Sequence[str]] = None,
                    name: str = "graph", unknown_dim: int = 1,
                    loop_trip_counts: LoopTripCounts = None) -> OpGraph:
  """Imports a MetaGraphDef.

  The train op comes from `train_op` (a name or names) or the "train_op"
  collection; the loss from `loss` or the "losses" collection; the init op
  from `init_ops`, the "init_op" collection or a node named "init".
  """
  def collection(key: str) -> List[str]:
    cd = meta_graph_def.collection_def.get(key)
    return list(cd.node_list.value) if cd is not None else []

  if isinstance(train_op, str):
    train_op = [train_op]
  # TF1 optimizers add their op to the collection too: keep each once.
  train = list(dict.fromkeys(train_op or collection("train_op")))
  if loss is None:
    losses = collection("losses")
    if len(losses) > 1:
      logging.warning("%s: %d losses collected; using %s", name, len(losses),
                      losses[0])
    loss = losses[0] if losses else None
  if init_ops is None:
    init_ops = collection("init_op") or None
  return from_graph_def(meta_graph_def.graph_def,
                        [_op_name(t) for t in train] or None, loss,
                        init_ops, name=name, unknown_dim=unknown_dim,
                        loop_trip_counts=loop_trip_counts)


def from_tf_graph(graph, train_ops: Optional[Sequence[str]],
                  loss: Optional[str], init_ops: Sequence[str] = (),
                  name: str = "graph", unknown_dim: int = 1,
                  loop_trip_counts: LoopTripCounts = None) -> OpGraph:
  """Reads a `tf.Graph` (graph mode) as an OpGraph.

  Args:
    graph: the graph holding one training step.
    train_ops: op names that perform the update (None: detect sinks).
    loss: loss tensor ("op:0") or op name, or None (detect the one scalar
      float op named "...loss", else the one the gradients start from,
      whether train_ops is given or detected: `step_loss.detect_loss`).
    init_ops: op names that initialize variables (None: a NoOp "init").
    name: a human readable name.
    unknown_dim: size of dimensions static shape inference leaves unknown.
    loop_trip_counts: trip counts of loops that are not static (see
      `import_graph`).

  Returns:
    The OpGraph, with colocation groups; each functional control-flow op is
    one op costed from its bodies (`Op.body`).

  Raises:
    GraphImportError: the graph is empty, or a loop's trip count is neither
      static nor given.
  """
  graph_def = graph.as_graph_def()
  if not graph_def.node:
    raise GraphImportError(f"{name}: the graph is empty (no ops)")
  with unknown_dims.noted() as unknown:
    flow = control_flow.ControlFlowAnalysis(
        graph, {f.signature.name: f for f in graph_def.library.function},
        name, unknown_dim, loop_trip_counts)
    bodies = flow.analyze()
    _record_given_trip_counts(graph_def, bodies)
    ops = [read_op(node, graph.get_operation_by_name(node.name), unknown_dim,
                   body=bodies.get(node.name),
                   variant_bytes=flow.variant_bytes)
           for node in graph_def.node]
  edges = _read_edges(graph_def, ops, name)
  frames = sorted({n.attr["frame_name"].s.decode() for n in graph_def.node
                   if n.op in ("Enter", "RefEnter")})
  if frames:
    logging.warning(
        "%s: %d TF1 while-loop frame(s) (Enter/Exit ops, e.g. %s): their ops "
        "are costed for one iteration, not times the trip count; build the "
        "loop with TF2 control flow (tf.while_loop -> While, the default) to "
        "have it costed in full", name, len(frames), frames[0])
  fetches = _fetches(ops, edges, train_ops, loss, init_ops, name)
  groups = colocation.colocation_groups(ops, edges)
  graph_out = OpGraph(ops, edges, graph_def, fetches=fetches, name=name,
                      colocation_groups=groups)
  unknown_dims.warn_for_step(
      unknown, graph, {op.name for op, runs in zip(ops, graph_out.step_mask)
                       if runs})
  logging.info("imported %s: %d ops, %d edges, %d colocation groups", name,
               graph_out.num_ops, graph_out.num_edges,
               graph_out.num_colocation_groups)
  return graph_out


def _op_names(ops, what: str) -> Optional[List[str]]:
  """Op names from names, `tf.Operation`s or `tf.Tensor`s (their ops)."""
  import tensorflow as tf
  if ops is None:
    return None
  if isinstance(ops, (str, tf.Operation, tf.Tensor)):
    ops = [ops]
  names = []
  for op in ops:
    if isinstance(op, tf.Tensor):
      op = op.op
    if isinstance(op, tf.Operation):
      op = op.name
    if not isinstance(op, str):
      raise GraphImportError(f"{what}: expected op names, tf.Operations or "
                             f"tf.Tensors, got a {type(op).__name__}")
    names.append(op)
  return names


def _record_given_trip_counts(graph_def, bodies) -> None:
  """Writes given trip counts into the loops' NodeDefs (kept in files)."""
  for node in graph_def.node:
    body = bodies.get(node.name)
    if body is not None and body.trip_count_source == "given":
      node.attr[control_flow.TRIP_COUNT_ATTR].i = body.trip_count


def _op_name(tensor_or_op: str) -> str:
  return tensor_or_op.lstrip("^").split(":")[0]


def _read_edges(graph_def, ops: Sequence[Op], name: str) -> List[Edge]:
  index = {op.name: i for i, op in enumerate(ops)}
  edges = []
  for dst, node in enumerate(graph_def.node):
    for inp in node.input:
      src_name = _op_name(inp)
      if src_name not in index:
        raise GraphImportError(f"{name}: op {node.name!r} reads {inp!r}, "
                               "which is not in the graph")
      src = index[src_name]
      if inp.startswith("^"):
        edges.append(Edge(src, dst, -1, 0))
        continue
      out = int(inp.split(":")[1]) if ":" in inp else 0
      edges.append(Edge(src, dst, out, ops[src].output_bytes[out]))
  return edges


def _fetches(ops: Sequence[Op], edges: Sequence[Edge], train_ops, loss,
             init_ops, name: str) -> StepFetches:
  """Checks the given fetches, detecting the missing ones."""
  names = {op.name for op in ops}
  if init_ops is None:
    init_ops = [op.name for op in ops
                if op.name == "init" and op.type == "NoOp"]
    if not init_ops:
      init_ops = _variable_initializers(ops, name)
  if train_ops is None:
    train_ops = _detect_train_ops(ops, edges, set(init_ops))
  if loss is None:
    loss = detect_loss(ops, edges)
    if loss is None and train_ops:
      say_none_found(ops, edges, name)
  for op_name in list(train_ops) + list(init_ops) + ([loss] if loss else []):
    if _op_name(op_name) not in names:
      raise GraphImportError(f"{name}: {op_name!r} is not an op of the graph")
  if loss is not None and ":" not in loss:
    loss = f"{loss}:0"
  if not train_ops:
    logging.warning("%s: no train op found; a step runs nothing", name)
  return StepFetches(train_ops=tuple(_op_name(t) for t in train_ops),
                     loss=loss, init_ops=tuple(init_ops))


# The ops a variable's constructor names "VARIABLE/Assign" (its initializer).
_ASSIGN_OPS = frozenset({"Assign", "AssignVariableOp"})


def _variable_initializers(ops: Sequence[Op], name: str) -> List[str]:
  """The "VARIABLE/Assign" op each variable's constructor made, for a TF1
  graph exported without an "init" op (its variables would be read
  uninitialized); a warning names the variables that have none."""
  by_name = {op.name: op for op in ops}
  found, missing = [], []
  for op in ops:
    if op.type not in VARIABLE_OPS:
      continue
    assign = by_name.get(f"{op.name}/Assign")
    if assign is not None and assign.type in _ASSIGN_OPS:
      found.append(assign.name)
    else:
      missing.append(op.name)
  if found:
    logging.info("%s: no init op; initializing its %d variable(s) with "
                 "their own initializers", name, len(found))
  if missing:
    logging.warning(
        "%s: no init op (e.g. tf.compat.v1.global_variables_initializer(), "
        "named \"init\") and no initializer found for %d variable(s), e.g. "
        "%s: a real run reads them uninitialized; pass init_ops=", name,
        len(missing), missing[0])
  return found


def _detect_train_ops(ops: Sequence[Op], edges: Sequence[Edge],
                      init_ops: set) -> List[str]:
  """Sink ops (no consumers) that are not the init op or a Const.

  If some of them are NoOps (grouped updates, as `minimize` makes), only
  those: other sinks are then side reads such as VarIsInitializedOp.
  """
  has_consumer = np.zeros(len(ops), dtype=bool)
  for e in edges:
    has_consumer[e.src] = True
  sinks = [op for i, op in enumerate(ops)
           if not has_consumer[i] and op.name not in init_ops
           and op.type != "Const"]
  no_ops = [op.name for op in sinks if op.type == "NoOp"]
  return no_ops or [op.name for op in sinks]
