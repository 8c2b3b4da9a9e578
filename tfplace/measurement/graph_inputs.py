"""What a training step takes from outside its ops: placeholders and input
pipelines, read from the graph.

* `placeholders(graph, ...)`: the `Placeholder` ops a run needs (ancestors of
  the train ops and loss, of the init ops and of the input pipelines'
  initializers and enqueue ops), with their dtype and static shape.
* `index_bound(tf_graph, name)`: for an integer placeholder, the exclusive
  upper bound its values must respect, from how the graph uses it: indices of
  a gather (the table's rows), labels of a sparse softmax (the logits'
  classes), one-hot indices (the depth), segment ids, in-top-k targets. The
  placeholder's value is followed through ops that keep ids ids (Identity,
  Reshape, Cast, slices, ...).
* `pipelines(graph, ...)`: the tf.data iterators (`IteratorGetNext` on a
  one-shot or initializable iterator, whose `MakeIterator` must run before
  timing) and TF1 queues (`QueueDequeue*`, filled by enqueue ops run in
  background threads) that feed the step, and lookup-table initializers.
"""

import dataclasses
from typing import List, Optional, Set, Tuple

import numpy as np

from tfplace.graph import input_shapes
from tfplace.graph.input_shapes import declared_shape
from tfplace.graph.op_graph import OpGraph, StepFetches

PLACEHOLDER_OPS = ("Placeholder", "PlaceholderV2")
FEEDABLE_OPS = input_shapes.PLACEHOLDER_OPS
_GET_NEXT_OPS = ("IteratorGetNext", "IteratorGetNextSync",
                 "IteratorGetNextAsOptional")
_DEQUEUE_PREFIX = "QueueDequeue"
_ENQUEUE_OPS = ("QueueEnqueue", "QueueEnqueueV2", "QueueEnqueueMany",
                "QueueEnqueueManyV2")
_TABLE_INIT_OPS = ("InitializeTable", "InitializeTableV2",
                   "InitializeTableFromTextFile",
                   "InitializeTableFromTextFileV2", "LookupTableImportV2",
                   "InitializeTableFromDataset")
# Ops whose output at index 0 holds the same ids as the given input.
_ID_PRESERVING = {"Identity": (0,), "Snapshot": (0,), "StopGradient": (0,),
                  "Reshape": (0,), "ExpandDims": (0,), "Squeeze": (0,),
                  "Cast": (0,), "Transpose": (0,), "StridedSlice": (0,),
                  "Slice": (0,), "Tile": (0,), "GatherV2": (0,),
                  "Gather": (0,), "ConcatV2": None, "Pack": None,
                  "Unpack": (0,), "Split": (1,), "SplitV": (0,),
                  "IdentityN": None}


@dataclasses.dataclass(frozen=True)
class PlaceholderSpec:
  """A placeholder as the graph declares it.

  Attributes:
    name: op name.
    dtype: TF dtype name ("float32", "int64", ...).
    shape: static dims (None where unknown); None when even the rank is
      unknown.
  """
  name: str
  dtype: str
  shape: Optional[Tuple[Optional[int], ...]]

  def shape_text(self) -> str:
    return input_shapes.shape_text(self.shape)


@dataclasses.dataclass(frozen=True)
class Pipelines:
  """The input pipelines a step reads.

  Attributes:
    init_ops: `MakeIterator` and lookup-table initializer ops to run once
      before any step (not already run by the graph's own init ops).
    enqueue_ops: enqueue ops of the TF1 queues the step dequeues from, run
      in background threads while steps run.
    queues: those queues' op names.
    sources: (op name, how) per pipeline, for the report.
  """
  init_ops: Tuple[str, ...] = ()
  enqueue_ops: Tuple[str, ...] = ()
  queues: Tuple[str, ...] = ()
  sources: Tuple[Tuple[str, str], ...] = ()

  @property
  def any(self) -> bool:
    return bool(self.sources)


def _node_inputs(graph: OpGraph) -> List[List[str]]:
  """Per op, its data input op names (GraphDef order)."""
  out = []
  for node in graph.graph_def.node:
    out.append([i.split(":")[0] for i in node.input if not i.startswith("^")])
  return out


def step_fetches(graph: OpGraph) -> StepFetches:
  """What one step of `graph` runs: its train ops and loss, else every op
  without consumers; its init ops, else the op named "init" if any."""
  fetches = graph.fetches
  train_ops = tuple(fetches.train_ops)
  if not train_ops and not fetches.loss:
    ptr, _ = graph.successors_csr
    train_ops = tuple(op.name for i, op in enumerate(graph.ops)
                      if ptr[i + 1] == ptr[i])
  init = tuple(fetches.init_ops)
  if not init and "init" in graph.index:
    init = ("init",)
  return StepFetches(train_ops=train_ops, loss=fetches.loss, init_ops=init)


def pipelines(graph: OpGraph, fetches: StepFetches) -> Pipelines:
  """The tf.data iterators, queues and lookup tables the step reads."""
  step = graph.ancestors(fetches.step_roots)
  initialized = graph.ancestors(fetches.init_ops)
  inputs = _node_inputs(graph)
  init_ops, enqueue, queues, sources = [], [], [], []
  for i, op in enumerate(graph.ops):
    src = inputs[i]
    if op.type == "MakeIterator" and len(src) > 1 and step[
        graph.index[src[1]]]:
      if not initialized[i]:
        init_ops.append(op.name)
      sources.append((src[1], f"tf.data iterator, initialized by "
                      f"{op.name!r} before timing"))
    elif op.type in _TABLE_INIT_OPS and src and step[graph.index[src[0]]]:
      if not initialized[i]:
        init_ops.append(op.name)
    elif op.type in _ENQUEUE_OPS and src and step[graph.index[src[0]]]:
      enqueue.append(op.name)
      if src[0] not in queues:
        queues.append(src[0])
  for i, op in enumerate(graph.ops):
    if step[i] and op.type == "OneShotIterator":
      sources.append((op.name, "one-shot tf.data iterator"))
  for queue in queues:
    count = sum(1 for e in enqueue if inputs[graph.index[e]][0] == queue)
    sources.append((queue, f"TF1 queue, filled by {count} enqueue op(s) "
                    "in background threads"))
  return Pipelines(tuple(init_ops), tuple(enqueue), tuple(queues),
                   tuple(sources))


def reads_pipeline(graph: OpGraph, fetches: StepFetches) -> bool:
  """True if the step takes a batch from an iterator or a queue (its first
  run fills the pipeline's buffers)."""
  step = graph.ancestors(fetches.step_roots)
  return any(step[i] and (op.type in _GET_NEXT_OPS
                          or op.type.startswith(_DEQUEUE_PREFIX))
             for i, op in enumerate(graph.ops))


def needed_names(graph: OpGraph, fetches: StepFetches,
                 pipes: Pipelines) -> np.ndarray:
  """bool [M]: ops any run of the measurement may execute."""
  return graph.ancestors(fetches.step_roots + list(fetches.init_ops)
                   + list(pipes.init_ops) + list(pipes.enqueue_ops))


def placeholders(graph: OpGraph, needed: np.ndarray) -> List[PlaceholderSpec]:
  """The `Placeholder` ops among `needed`, as the GraphDef declares them."""
  import tensorflow as tf
  out = []
  for i, node in enumerate(graph.graph_def.node):
    if not needed[i] or node.op not in PLACEHOLDER_OPS:
      continue
    dtype = tf.as_dtype(node.attr["dtype"].type).name
    out.append(PlaceholderSpec(node.name, dtype, declared_shape(node)))
  return out


# ---- integer inputs used as indices ----------------------------------------


def index_bound(tf_graph, name: str) -> Tuple[Optional[int], str]:
  """(exclusive bound, why) for the values of integer placeholder `name`.

  Args:
    tf_graph: the imported `tf.Graph` (static shapes are read from it).
    name: the placeholder's op name.

  Returns:
    The smallest bound over every index use found, and a phrase naming it
    (e.g. "rows of 'emb' gathered by 'embedding_lookup'"); (None, "") when
    the value is never used as an index.
  """
  best: Tuple[Optional[int], str] = (None, "")
  seen: Set[str] = set()
  stack = [tf_graph.get_operation_by_name(name).outputs[0]]
  while stack:
    tensor = stack.pop()
    for consumer in tensor.consumers():
      key = f"{consumer.name}:{tensor.name}"
      if key in seen:
        continue
      seen.add(key)
      positions = [k for k, t in enumerate(consumer.inputs) if t is tensor]
      for position in positions:
        bound = _use_bound(consumer, position)
        if bound[0] is not None and (best[0] is None or bound[0] < best[0]):
          best = bound
        keep = _ID_PRESERVING.get(consumer.type, ())
        if keep is None or position in keep:
          stack.extend(consumer.outputs)
  return best


def _dim(shape, axis: int) -> Optional[int]:
  if shape.rank is None or not -shape.rank <= axis < shape.rank:
    return None
  return shape.as_list()[axis]


def _const(tensor) -> Optional[int]:
  import tensorflow as tf
  try:
    value = tf.get_static_value(tensor)
  except (TypeError, ValueError):
    return None
  return None if value is None or np.ndim(value) else int(value)


def _variable_rows(handle) -> Tuple[Optional[int], str]:
  """Rows of the resource variable behind `handle` (through Identity)."""
  op = handle.op
  while op.type == "Identity" and op.inputs:
    op = op.inputs[0].op
  if op.type != "VarHandleOp":
    return None, ""
  dims = op.get_attr("shape").dim
  return (int(dims[0].size) if dims and dims[0].size >= 0 else None), op.name


def _use_bound(op, position: int) -> Tuple[Optional[int], str]:
  """The bound that using its input `position` as indices puts on them."""
  kind = op.type
  if kind in ("ResourceGather",) and position == 1:
    rows, var = _variable_rows(op.inputs[0])
    return rows, f"rows of {var!r} gathered by {op.name!r}"
  if kind.startswith("ResourceScatter") and position == 1:
    rows, var = _variable_rows(op.inputs[0])
    return rows, f"rows of {var!r} updated by {op.name!r}"
  if kind in ("GatherV2", "Gather") and position == 1:
    axis = _const(op.inputs[2]) if kind == "GatherV2" else 0
    rows = None if axis is None else _dim(op.inputs[0].shape, axis)
    return rows, f"rows of {op.inputs[0].op.name!r} gathered by {op.name!r}"
  if kind == "SparseSoftmaxCrossEntropyWithLogits" and position == 1:
    return (_dim(op.inputs[0].shape, -1),
            f"classes of the logits of {op.name!r}")
  if kind in ("InTopK", "InTopKV2") and position == 1:
    return _dim(op.inputs[0].shape, 1), f"classes of {op.name!r}"
  if kind == "OneHot" and position == 0:
    return _const(op.inputs[1]), f"depth of {op.name!r}"
  if kind.startswith("UnsortedSegment") and position == 1:
    return _const(op.inputs[2]), f"segments of {op.name!r}"
  if kind.startswith("SparseSegment") and position == 1:
    return _dim(op.inputs[0].shape, 0), f"rows read by {op.name!r}"
  return None, ""
