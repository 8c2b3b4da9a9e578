"""Static values and TensorList sizes of tensors in functional control flow.

`LoopValues` is the half of `tfplace.graph.control_flow.ControlFlowAnalysis`
that answers "what is this tensor before the graph runs": a value (to find
trip counts, see `tfplace.graph.trip_counts`), the elements a TensorList
holds, and its length (to size the accumulators a loop keeps for its
gradient). Tensors live in a `Frame`: the imported graph or one function
body of a control-flow op, whose arguments are the op's inputs.
"""

import dataclasses
from typing import Callable, Dict, FrozenSet, List, Optional, Tuple

import numpy as np

from tfplace.graph import trip_counts
from tfplace.graph.function_bodies import CALL_OPS, WHILE_OPS, FunctionGraph
from tfplace.graph.op_graph import CONTROL_FLOW_OPS, ControlFlowCost
from tfplace.graph.op_reader import HANDLE_BYTES, resolve_shape, tensor_bytes
from tfplace.graph.trip_counts import through_identity

# Ops whose outputs come from function bodies.
FLOW_OPS = CONTROL_FLOW_OPS | CALL_OPS


@dataclasses.dataclass(eq=False)
class Frame:
  """Where ops live: the imported graph (fg None) or one function body.

  Attributes:
    fg: the function body (None for the imported graph).
    owner: the op that runs the body.
    parent: the frame `owner` lives in.
    path: prefix of the names of ops in the body ("while/").
    offset: `owner`'s input index of the body's argument 0.
    invariant: for a While body, the loop variables it passes unchanged.
  """
  fg: Optional[FunctionGraph]
  owner: Optional[object] = None
  parent: Optional["Frame"] = None
  path: str = ""
  offset: int = 0
  invariant: FrozenSet[int] = frozenset()


@dataclasses.dataclass(eq=False)
class Loop:
  """A While op being costed: its body frame, the loop variables the body
  steps by a constant (k -> (sign, step tensor)), trip count and cost."""
  body: Frame
  steps: Dict[int, Tuple[float, object]]
  trips: Optional[int] = None
  cost: Optional[ControlFlowCost] = None


class LoopValues:
  """Static values and TensorList sizes (a base of ControlFlowAnalysis).

  Subclasses provide `top` (the imported graph's Frame), `unknown_dim`,
  `_loop(op, frame) -> Loop`, `handle_data(tensor, frame)` and set
  `_blocker` to the loop whose unknown trip count made a value unknown.
  """

  top: Frame
  unknown_dim: int
  _blocker: Optional[str] = None
  _static_cache: Dict[Tuple[Frame, str], Tuple[object, Optional[str]]]

  def static(self, tensor, frame: Frame) -> Optional[np.ndarray]:
    """The value of `tensor` if it is known before the graph runs."""
    key = (frame, tensor.name)
    if key not in self._static_cache:
      outer, self._blocker = self._blocker, None
      value = self._static(tensor, frame)
      self._static_cache[key] = (value, self._blocker)
      self._blocker = self._blocker or outer
    value, blocker = self._static_cache[key]
    self._blocker = blocker or self._blocker
    return value

  def _static(self, tensor, frame: Frame) -> Optional[np.ndarray]:
    t = through_identity(tensor)
    value = _tf_static(t)
    if value is not None:
      return value
    op = t.op
    if op.type == "Placeholder" and frame.fg is not None:
      k = frame.fg.arg_index(op)
      if k is None or (frame.owner.type in WHILE_OPS
                       and k not in frame.invariant):
        return None
      return self.static(frame.owner.inputs[k + frame.offset], frame.parent)
    if op.type in WHILE_OPS:
      return self._loop_output(t, frame)
    if op.type == "TensorListPopBack" and t.value_index == 1:
      value = self._elements(op.inputs[0], frame, self.static)
      return None if value is EMPTY else value
    if t.value_index != 0 or op.type in FLOW_OPS or not op.inputs:
      return None
    if op.type == "StridedSlice":
      known = self._known_dims(op, frame)
      if known is not None:
        return known
    values = [self.static(x, frame) for x in op.inputs]
    if any(v is None for v in values):
      return None
    return trip_counts.fold(op, values)

  def _known_dims(self, op, frame: Frame) -> Optional[np.ndarray]:
    """The value of a StridedSlice of a `Shape` that selects only known
    dimensions of a partly known shape (`tf.shape(x)[0]` of a [12, None, 16]
    tensor: 12; how Keras's RNNs count their steps), else None."""
    shape_op = through_identity(op.inputs[0]).op
    if shape_op.type != "Shape":
      return None
    shape = self.known_shape(shape_op.inputs[0], frame)
    bounds = [self.static(x, frame) for x in op.inputs[1:]]
    if shape is None or any(b is None for b in bounds):
      return None
    # Unknown dimensions as -1, which no known dimension is.
    dims = np.array([-1 if d is None else d for d in shape],
                    dtype=shape_op.outputs[0].dtype.as_numpy_dtype)
    value = trip_counts.fold(op, [dims] + bounds)
    return None if value is None or np.any(value < 0) else value

  def known_shape(self, tensor, frame: Frame) -> Optional[List[Optional[int]]]:
    """`tensor`'s static shape with what the loops tell (None: unknown
    rank): the length of a TensorList stacked after a loop, passed on by
    Transpose, ConcatV2 and shape-keeping ops. TF's shape inference loses
    it where a loop's length is a tensor: the sequence length of a Keras
    RNN's outputs in `fit`'s step, which a stacked RNN loops over."""
    t = through_identity(tensor)
    if t.shape.rank is None:
      return None
    dims = t.shape.as_list()
    if None not in dims:
      return dims
    op = t.op
    derived = None
    if op.type == "TensorListStack":
      derived = [self.list_length(op.inputs[0], frame)] + dims[1:]
    elif op.type == "Transpose":
      inner = self.known_shape(op.inputs[0], frame)
      perm = self.static(op.inputs[1], frame)
      if inner is not None and perm is not None and np.size(perm) == len(
          inner):
        derived = [inner[int(k)] for k in np.reshape(perm, -1)]
    elif op.type == "ConcatV2":
      derived = self._concat_shape(op, frame, len(dims))
    elif op.type in _SHAPE_KEEPING_OPS:
      derived = self.known_shape(op.inputs[0], frame)
    if derived is None or len(derived) != len(dims):
      return dims
    return [d if d is not None else e for d, e in zip(dims, derived)]

  def _concat_shape(self, op, frame: Frame, rank: int):
    axis = self.static(op.inputs[-1], frame)
    parts = [self.known_shape(x, frame) for x in op.inputs[:-1]]
    if axis is None or any(p is None or len(p) != rank for p in parts):
      return None
    axis = int(axis) % rank
    out = []
    for k in range(rank):
      known = [p[k] for p in parts if p[k] is not None]
      if k == axis:
        out.append(sum(known) if len(known) == len(parts) else None)
      else:
        out.append(known[0] if known else None)
    return out

  def _loop_output(self, t, frame: Frame) -> Optional[np.ndarray]:
    """A While output's value: invariant, or an induction variable's end."""
    op, k = t.op, t.value_index
    loop = self._loop(op, frame)
    if k in loop.body.invariant:
      return self.static(op.inputs[k], frame)
    if k not in loop.steps:
      return None
    if loop.trips is None:
      self._blocker = frame.path + op.name
      return None
    sign, step_tensor = loop.steps[k]
    init = self.static(op.inputs[k], frame)
    step = self.static(step_tensor, loop.body)
    if init is None or step is None:
      return None
    return np.asarray(init + sign * loop.trips * step)

  def _elements(self, tensor, frame: Frame, of: Callable, stop=None):
    """What every element of a TensorList shares, or None.

    `of(pushed tensor, frame)` is the property (a static value, handle
    data); `EMPTY` stands for an empty list. This is how a gradient loop
    nested in a gradient loop finds its trip count and element shapes: the
    forward inner loop's counter and TensorLists are pushed once per outer
    trip and popped by the backward outer loop. `stop`: a loop variable whose
    elements count as none (to see what one trip pushes).
    """
    t = through_identity(tensor)
    op = t.op
    if op.type == "EmptyTensorList" or t is stop:
      return EMPTY
    if op.type == "TensorListPushBack" and t.value_index == 0:
      return _merge_elements(of(op.inputs[1], frame),
                             self._elements(op.inputs[0], frame, of, stop))
    if op.type == "TensorListPopBack" and t.value_index == 0:
      return self._elements(op.inputs[0], frame, of, stop)
    if op.type == "Placeholder" and frame.fg is not None:
      k = frame.fg.arg_index(op)
      if k is None:
        return None
      outer = self._elements(frame.owner.inputs[k + frame.offset],
                             frame.parent, of)
      if frame.owner.type not in WHILE_OPS or k in frame.invariant:
        return outer
      return _merge_elements(outer, self._elements(
          frame.fg.outputs[k], frame, of, frame.fg.args[k]))
    if op.type in WHILE_OPS:
      loop = self._loop(op, frame)
      k, fg = t.value_index, loop.body.fg
      if k >= len(fg.outputs):
        return None
      return _merge_elements(
          self._elements(op.inputs[k], frame, of),
          self._elements(fg.outputs[k], loop.body, of, fg.args[k]))
    return None

  # ---- TensorList sizes --------------------------------------------------

  def variant_bytes(self, tensor) -> Optional[int]:
    """Bytes of a TensorList tensor of the imported graph, if known."""
    return self._list_bytes(tensor, self.top)

  def _list_bytes(self, tensor, frame: Frame) -> Optional[int]:
    import tensorflow as tf
    data = self.handle_data(tensor, frame)
    if data is None or not data.shape_and_type:
      return None
    first = data.shape_and_type[0]
    dtype = tf.as_dtype(first.dtype)
    if dtype.name in ("variant", "resource", "string"):
      return None
    length = self.list_length(tensor, frame)
    if length is None:
      return None
    element = tensor_bytes(dtype, resolve_shape(tf.TensorShape(first.shape),
                                                self.unknown_dim))
    return max(int(length) * element, HANDLE_BYTES)

  def list_length(self, tensor, frame: Frame) -> Optional[int]:
    """Elements of a TensorList tensor, if known before the graph runs."""
    t = through_identity(tensor)
    op = t.op
    if op.type == "EmptyTensorList":
      return 0
    if op.type == "TensorListReserve":
      n = self.static(op.inputs[1], frame)
      return None if n is None or np.size(n) != 1 else int(n)
    if op.type == "TensorListFromTensor":
      dims = op.inputs[0].shape.as_list() if op.inputs[0].shape.rank else []
      return dims[0] if dims else None
    if op.type in _LIST_DELTA and t.value_index == 0:
      inner = self.list_length(op.inputs[0], frame)
      return None if inner is None else inner + _LIST_DELTA[op.type]
    if op.type == "Placeholder" and frame.fg is not None:
      k = frame.fg.arg_index(op)
      if k is None or (frame.owner.type in WHILE_OPS
                       and k not in frame.invariant):
        return None
      return self.list_length(frame.owner.inputs[k + frame.offset],
                              frame.parent)
    if op.type in WHILE_OPS:
      return self._loop_list_length(t, frame)
    return None

  def _loop_list_length(self, t, frame: Frame) -> Optional[int]:
    op, k = t.op, t.value_index
    loop = self._loop(op, frame)
    fg = loop.body.fg
    if k >= len(fg.outputs) or loop.trips is None:
      return None
    delta = _list_delta(fg.outputs[k], fg.args[k])
    init = self.list_length(op.inputs[k], frame)
    if delta is None or init is None:
      return None
    return max(init + delta * loop.trips, 0)


# Ops whose output has their first input's shape (`LoopValues.known_shape`).
_SHAPE_KEEPING_OPS = ("ReverseV2", "Relu", "Tanh", "Sigmoid", "Cast", "Neg",
                      "ZerosLike", "OnesLike")

# What the elements of an empty TensorList share (`_elements`).
EMPTY = object()


def _merge_elements(a, b):
  """What two sets of list elements share (a value or handle data), or None."""
  if a is None or b is None:
    return None
  if a is EMPTY:
    return b
  if b is EMPTY or _same(a, b):
    return a
  return None


def _same(a, b) -> bool:
  if hasattr(a, "SerializeToString"):
    return (hasattr(b, "SerializeToString")
            and a.SerializeToString() == b.SerializeToString())
  return np.array_equal(a, b)


_LIST_DELTA = {"TensorListPushBack": 1, "TensorListPopBack": -1,
               "TensorListSetItem": 0}


def _list_delta(output, arg) -> Optional[int]:
  """Elements one trip adds to a TensorList loop variable, or None."""
  t, delta = through_identity(output), 0
  while t is not arg:
    op = t.op
    if op.type not in _LIST_DELTA or t.value_index != 0:
      return None
    delta += _LIST_DELTA[op.type]
    t = through_identity(op.inputs[0])
  return delta


def _tf_static(tensor) -> Optional[np.ndarray]:
  import tensorflow as tf
  if tensor.dtype.name in ("variant", "resource", "string"):
    return None
  try:
    return tf.get_static_value(tensor)
  except (TypeError, ValueError, NotImplementedError, tf.errors.OpError):
    return None
