"""OpGraph: the training step as ops, tensors and colocation groups.

Every importer (tf.Graph, GraphDef, MetaGraphDef, tf.function, Keras) produces
an `OpGraph`; every later stage (costs, grouping, placers, the simulator,
apply) reads it. Ops are indexed 0..M-1 in GraphDef order; `topo_order` gives a
topological order. Array views (CSR successor/predecessor lists, per-tensor
consumer lists) are built once, lazily, for the fast algorithms.
"""

import dataclasses
import functools
import hashlib
from typing import Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from tfplace.errors import GraphImportError
from tfplace.graph.conv_geometry import ConvGeometry

Shape = Tuple[int, ...]

# Ops that carry a whole control-flow construct (their bodies are functions);
# each is one unit placed whole.
CONTROL_FLOW_OPS = frozenset({
    "While", "StatelessWhile", "If", "StatelessIf", "Case", "StatelessCase",
})
# TF1 loop ops whose outputs feed the next iteration: their out-edges are loop
# back edges, left out of every DAG view.
LOOP_BACK_OPS = frozenset({"NextIteration", "RefNextIteration"})
# TF1 loop ops: a loop frame is unioned into one colocation group.
LOOP_FRAME_OPS = frozenset({
    "Enter", "RefEnter", "Exit", "RefExit", "NextIteration",
    "RefNextIteration", "Merge", "RefMerge", "Switch", "RefSwitch", "LoopCond",
})
# The name of a While's frame rows in its `ControlFlowCost` (after the path
# of its body: "while/(loop frame)").
LOOP_FRAME = "(loop frame)"
# Ops whose output is a variable's own buffer, already held as the variable's
# parameter bytes: the variable ops, and a resource read (TF's
# ReadVariableOp returns the variable's tensor, sharing its buffer; not in
# copy-on-read mode, `COPY_ON_READ`).
VARIABLE_OPS = frozenset({"VarHandleOp", "VariableV2", "Variable"})
VARIABLE_BUFFER_OPS = VARIABLE_OPS | {"ReadVariableOp"}
# `Op.variant` of a dense read or update of a variable in copy-on-read mode,
# which copies it whole (`tfplace.graph.variable_copies`).
COPY_ON_READ = "copy_on_read"
# Ops whose kernel holds its output for the session's life: TF's ConstantOp
# allocates its tensor on its device when the kernel is built, so it is in
# memory before the step, all step, whether or not the step runs the op (an
# initializer's constants too). Measured on one-core TF server workers
# (WORKSPACE_NOTES.md, "Tried as a new user: trace inspection and real
# runs", seventeenth session): the bytes in use before a step's first
# allocation are the variables' plus the constants' (+ ~2 KiB).
CONSTANT_OPS = frozenset({"Const"})
# TF's BFC allocator (every GPU's, and the CPU's on tfplace's workers) hands
# out multiples of 256 bytes: a scalar takes 256.
ALLOCATION_GRANULE = 256


def allocated_bytes(nbytes: int) -> int:
  """The bytes an allocation of `nbytes` takes (0 for none)."""
  return -(-int(nbytes) // ALLOCATION_GRANULE) * ALLOCATION_GRANULE


@dataclasses.dataclass(frozen=True)
class BodyOp:
  """One op that a functional control-flow op runs inside its functions.

  Attributes:
    name: the op's path below the control-flow op ("while/MatMul"; loop
      bookkeeping rows are named "(loop frame)").
    type: TF op type.
    flops: FLOPs of one execution.
    bytes_moved: input plus output bytes of one execution.
    executions: how many times it runs per run of the control-flow op (the
      trip count, times the trip counts of enclosing nested loops).
  """
  name: str
  type: str
  flops: float
  bytes_moved: int
  executions: float


@dataclasses.dataclass(frozen=True)
class ControlFlowCost:
  """The work of a functional control-flow op (While/If/Case), from its
  function bodies (see `tfplace.graph.control_flow`).

  Attributes:
    ops: every op it runs, flattened over nested control flow.
    trip_count: iterations of a While (None for If/Case).
    trip_count_source: how the trip count was found ("static: ..." or
      "given"); "" for If/Case.
    working_bytes: bytes of the tensors one iteration of the body produces
      (held while the op runs; nested control flow included).
  """
  ops: Tuple[BodyOp, ...]
  trip_count: Optional[int] = None
  trip_count_source: str = ""
  working_bytes: int = 0

  @property
  def flops(self) -> float:
    """FLOPs of one run of the control-flow op (all iterations)."""
    return float(sum(o.flops * o.executions for o in self.ops))

  @property
  def bytes_moved(self) -> float:
    """Bytes its ops read and write over one run (all iterations)."""
    return float(sum(o.bytes_moved * o.executions for o in self.ops))


@dataclasses.dataclass(frozen=True)
class Op:
  """One operation of the training step.

  Attributes:
    name: unique node name.
    type: TF op type (e.g. "MatMul").
    output_shapes: static shape per output; unknown dimensions resolved
      at import (see the importer's `unknown_dim`).
    output_dtypes: dtype name per output (e.g. "float32", "resource").
    output_bytes: bytes per output tensor.
    param_bytes: persistent bytes this op holds (variables, optimizer slots).
    flops: floating point operations of one execution.
    kernels: device types with a registered kernel (e.g. {"CPU", "GPU"}).
    requested_device: the NodeDef's device field as imported ("" if none).
    colocation_names: names from the `_class` attr ("loc:@x" -> "x").
    body: for functional control flow (While/If/Case), the ops its
      functions run and the trip count; `flops` is then their total.
    stride: the largest stride of a windowed op (convolutions and their
      gradients, pooling: the NodeDef's `strides`); 1 for other ops.
    conv: a convolution gradient's geometry (its kernel's scratch memory
      depends on it: `tfplace.cost.scratch`); None for other ops.
    variant: a kind of execution of its type that a calibration fits
      apart (`tfplace.graph.op_reader.cost_variant`): "batched", an einsum
      with batch indices (attention's scores and context: TF runs one
      small matrix product per batch index, several times slower than one
      product of the same work); "channels_first", a fused batch norm over
      NCHW data (Keras's layer normalization: one channel per row);
      "narrow_window", a filter gradient whose filter window (rows x
      columns x input channels) is under `op_reader.NARROW_WINDOW` (1x1
      filters, first layers: ~half the rate of wider ones at the same
      work); "transpose_b", a MatMul by its transposed right operand (a
      dense layer's input gradient: ~1.5-2x the time of the forward and
      weight-gradient products at the same work on a CPU); "copy_on_read",
      a dense read or update of a variable in copy-on-read mode (it copies
      the variable whole: `copy_bytes`); "" for other ops.
    matrix_products: the matrix products one execution runs (a batched
      matmul or einsum runs one per batch index: `op_flops.
      matrix_products`); 1 for other ops. Each costs a fixed time beyond
      its FLOPs where a calibration fitted one (`OpTypeCost.per_product_s`).
    copy_bytes: bytes one execution reads and writes to copy data besides
      its own work: an einsum's operands put into another order before
      the product, or its result after (`op_flops.einsum_transposes`; a
      copy that moves the last dimension counted
      `op_flops.INNER_TRANSPOSE_WEIGHT` times); a variable in copy-on-read
      mode that a dense read or update copies whole (twice its size:
      `variable_copies.copied_variable_bytes`); 0 for other ops. Costed
      as memory traffic beside the op's roofline.
  """
  name: str
  type: str
  output_shapes: Tuple[Shape, ...] = ()
  output_dtypes: Tuple[str, ...] = ()
  output_bytes: Tuple[int, ...] = ()
  param_bytes: int = 0
  flops: float = 0.0
  kernels: FrozenSet[str] = frozenset({"CPU", "GPU"})
  requested_device: str = ""
  colocation_names: Tuple[str, ...] = ()
  body: Optional[ControlFlowCost] = None
  stride: int = 1
  conv: Optional[ConvGeometry] = None
  variant: str = ""
  matrix_products: int = 1
  copy_bytes: int = 0

  @property
  def is_control_flow(self) -> bool:
    """True for functional control flow (While/If/Case), placed whole."""
    return self.type in CONTROL_FLOW_OPS

  @property
  def total_output_bytes(self) -> int:
    return int(sum(self.output_bytes))


@dataclasses.dataclass(frozen=True)
class Edge:
  """A data edge (tensor `src:src_output` -> `dst`) or a control edge.

  Attributes:
    src: producing op index.
    dst: consuming op index.
    src_output: output index of the tensor, -1 for a control edge.
    bytes: tensor bytes (0 for control edges).
  """
  src: int
  dst: int
  src_output: int
  bytes: int

  @property
  def is_control(self) -> bool:
    return self.src_output < 0


@dataclasses.dataclass(frozen=True)
class StepFetches:
  """What to run for one training step.

  Attributes:
    train_ops: target op names that perform the update (run, not fetched).
    loss: name of the loss tensor ("op:0"), if known.
    init_ops: op names that initialize the variables (run once, first).
  """
  train_ops: Tuple[str, ...] = ()
  loss: Optional[str] = None
  init_ops: Tuple[str, ...] = ()

  @property
  def step_roots(self) -> List[str]:
    """The names a step runs: the train ops and the loss."""
    return list(self.train_ops) + ([self.loss] if self.loss else [])


class OpGraph:
  """A TensorFlow training step as a graph of ops.

  Attributes:
    ops: the ops, index = op id.
    edges: data and control edges between op ids.
    graph_def: the GraphDef the ops came from (used to apply placements).
    fetches: what one training step runs.
    name: a human name (model or file).
  """

  def __init__(self, ops: Sequence[Op], edges: Sequence[Edge], graph_def,
               fetches: StepFetches = StepFetches(), name: str = "graph",
               colocation_groups: Optional[np.ndarray] = None):
    """Builds the graph.

    Args:
      ops: ops in GraphDef order.
      edges: edges between op indices.
      graph_def: the `tf.compat.v1.GraphDef` the ops were read from.
      fetches: the training step's targets and loss.
      name: a human readable name.
      colocation_groups: optional int array [M]: op -> colocation group id.
        If None, every op is its own group. Importers pass the union-find
        result of `tfplace.graph.colocation`.
    """
    if not ops:
      raise GraphImportError(f"{name}: the graph has no ops")
    self.ops: List[Op] = list(ops)
    self.edges: List[Edge] = list(edges)
    self.graph_def = graph_def
    self.fetches = fetches
    self.name = name
    self.index: Dict[str, int] = {op.name: i for i, op in enumerate(self.ops)}
    if len(self.index) != len(self.ops):
      raise GraphImportError(f"{name}: duplicate op names")
    m = len(self.ops)
    if colocation_groups is None:
      colocation_groups = np.arange(m, dtype=np.int32)
    self.group_of = _renumber(np.asarray(colocation_groups, dtype=np.int32))

  # ---- sizes and lookups -------------------------------------------------

  @property
  def num_ops(self) -> int:
    return len(self.ops)

  @property
  def num_edges(self) -> int:
    return len(self.edges)

  def op(self, name: str) -> Op:
    return self.ops[self.index[name]]

  @functools.cached_property
  def colocation_groups(self) -> List[List[int]]:
    """Op indices per colocation group (a hard constraint), group id order."""
    groups: List[List[int]] = [[] for _ in range(int(self.group_of.max()) + 1)]
    for i, g in enumerate(self.group_of):
      groups[g].append(i)
    return groups

  @property
  def num_colocation_groups(self) -> int:
    return int(self.group_of.max()) + 1

  # ---- per-op arrays -----------------------------------------------------

  @functools.cached_property
  def op_types(self) -> List[str]:
    return [op.type for op in self.ops]

  @functools.cached_property
  def flops(self) -> np.ndarray:
    return np.array([op.flops for op in self.ops], dtype=np.float64)

  @functools.cached_property
  def copy_bytes(self) -> np.ndarray:
    """float64 [M]: each op's `Op.copy_bytes`."""
    return np.array([op.copy_bytes for op in self.ops],
                    dtype=np.float64)

  @functools.cached_property
  def param_bytes(self) -> np.ndarray:
    return np.array([op.param_bytes for op in self.ops], dtype=np.int64)

  @functools.cached_property
  def output_bytes(self) -> np.ndarray:
    """Total bytes of all outputs, per op."""
    return np.array([op.total_output_bytes for op in self.ops], dtype=np.int64)

  @functools.cached_property
  def resident_bytes(self) -> np.ndarray:
    """Bytes an op holds for the session's life, per op: its `param_bytes`
    (variables, optimizer slots) and a constant's tensor (`CONSTANT_OPS`,
    rounded up as TF's allocator does)."""
    held = self.param_bytes.copy()
    for i, op in enumerate(self.ops):
      if op.type in CONSTANT_OPS:
        held[i] += sum(allocated_bytes(b) for b in op.output_bytes)
    return held

  @functools.cached_property
  def activation_bytes(self) -> np.ndarray:
    """Bytes an op holds while its outputs live, per op: its outputs (each
    rounded up as TF's allocator does, `allocated_bytes`), plus for
    functional control flow the working set of one body iteration.

    An output that is a variable's own buffer holds nothing more (the
    variable's `param_bytes` hold it all step): the variable ops', a
    resource read's (`VARIABLE_BUFFER_OPS`; a read in copy-on-read mode,
    `COPY_ON_READ`, returns a copy, which it holds), and an Identity's of a
    ref variable (TF1's "w/read"); nor does a constant's (`resident_bytes`
    hold it). Counted as copies they put every variable
    in memory twice or three times; measured on TF server workers, that
    over-predicted the peak by up to 1.6x (WORKSPACE_NOTES.md, "Memory").
    """
    held = np.array([sum(allocated_bytes(b) for b in op.output_bytes)
                     + (op.body.working_bytes if op.body else 0)
                     for op in self.ops], dtype=np.int64)
    for i, op in enumerate(self.ops):
      if ((op.type in VARIABLE_BUFFER_OPS and op.variant != COPY_ON_READ)
          or op.type in CONSTANT_OPS or
          (op.type == "Identity" and self._reads_ref_variable(i))):
        held[i] = 0
    return held

  def _reads_ref_variable(self, i: int) -> bool:
    """True if an input of op i comes from a ref variable op."""
    ptr, pred = self.predecessors_csr
    return any(self.ops[j].type in ("VariableV2", "Variable")
               for j in pred[ptr[i]:ptr[i + 1]])

  @functools.cached_property
  def input_bytes(self) -> np.ndarray:
    """Total bytes of all data inputs, per op."""
    out = np.zeros(self.num_ops, dtype=np.int64)
    for e in self.edges:
      out[e.dst] += e.bytes
    return out

  # ---- CSR adjacency -----------------------------------------------------

  @functools.cached_property
  def edge_arrays(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(src, dst, src_output, bytes) int arrays, one entry per edge."""
    if not self.edges:
      z = np.zeros(0, dtype=np.int64)
      return z.astype(np.int32), z.astype(np.int32), z.astype(np.int32), z
    a = np.array([(e.src, e.dst, e.src_output, e.bytes) for e in self.edges],
                 dtype=np.int64)
    return (a[:, 0].astype(np.int32), a[:, 1].astype(np.int32),
            a[:, 2].astype(np.int32), a[:, 3])

  @functools.cached_property
  def successors_csr(self) -> Tuple[np.ndarray, np.ndarray]:
    """(ptr [M+1], dst [E]): successors of op i are dst[ptr[i]:ptr[i+1]].

    Includes control edges; excludes loop back edges (from NextIteration).
    """
    src, dst = self._dag_edges()
    return _csr(src, dst, self.num_ops)

  @functools.cached_property
  def predecessors_csr(self) -> Tuple[np.ndarray, np.ndarray]:
    """(ptr [M+1], src [E]): predecessors of op i, as `successors_csr`."""
    src, dst = self._dag_edges()
    return _csr(dst, src, self.num_ops)

  @functools.cached_property
  def is_back_edge_source(self) -> np.ndarray:
    """bool [M]: ops whose out-edges close a TF1 loop (NextIteration)."""
    return np.array([t in LOOP_BACK_OPS for t in self.op_types], dtype=bool)

  @functools.cached_property
  def dag_edge_mask(self) -> np.ndarray:
    """bool [E]: the edges of the DAG view (loop back edges left out).

    The one filter every DAG algorithm uses (topological order, longest
    paths, the simulator, list schedulers).
    """
    src = self.edge_arrays[0]
    return ~self.is_back_edge_source[src] if len(src) else np.ones(0, bool)

  def _dag_edges(self) -> Tuple[np.ndarray, np.ndarray]:
    src, dst, _, _ = self.edge_arrays
    keep = self.dag_edge_mask
    return src[keep], dst[keep]

  @functools.cached_property
  def topo_order(self) -> np.ndarray:
    """Op indices in a topological order (Kahn, ties by GraphDef order)."""
    ptr, succ = self.successors_csr
    indeg = np.diff(self.predecessors_csr[0]).astype(np.int64)
    order = list(np.flatnonzero(indeg == 0))
    head = 0
    while head < len(order):
      i = order[head]
      head += 1
      for j in succ[ptr[i]:ptr[i + 1]]:
        indeg[j] -= 1
        if indeg[j] == 0:
          order.append(j)
    if len(order) != self.num_ops:
      raise GraphImportError(
          f"{self.name}: the graph has a cycle that is not a TF loop")
    return np.array(order, dtype=np.int32)

  @functools.cached_property
  def step_mask(self) -> np.ndarray:
    """bool [M]: the ops one training step runs.

    Those are the train ops, the loss and all their ancestors (over data and
    control edges); the variable-initialization subgraph is not among them.
    Every op is still placed (the placed GraphDef sets every device), but
    only these cost time in a step. All True when no train op or loss is
    known.
    """
    mask = self.ancestors(self.fetches.step_roots)
    return mask if mask.any() else np.ones(self.num_ops, dtype=bool)

  def ancestors(self, names: Iterable[str]) -> np.ndarray:
    """bool [M]: the named ops (op or tensor names, "^op" too; names not
    in the graph are skipped) and all their ancestors over data and
    control edges."""
    ptr, pred = self.predecessors_csr
    seen = np.zeros(self.num_ops, dtype=bool)
    stack = []
    for name in names:
      i = self.index.get(name.lstrip("^").split(":")[0])
      if i is not None and not seen[i]:
        seen[i] = True
        stack.append(i)
    while stack:
      i = stack.pop()
      for j in pred[ptr[i]:ptr[i + 1]]:
        if not seen[j]:
          seen[j] = True
          stack.append(j)
    return seen

  # ---- tensors (what the simulator transfers) ----------------------------

  @functools.cached_property
  def tensors(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Data tensors with at least one consumer, as arrays.

    Returns:
      (producer [T], bytes [T], consumer_ptr [T+1], consumers [C]): the
      consumers of tensor t are consumers[consumer_ptr[t]:consumer_ptr[t+1]]
      (unique op ids). Control edges are not tensors.
    """
    by_tensor: Dict[Tuple[int, int], List[int]] = {}
    nbytes: Dict[Tuple[int, int], int] = {}
    for e in self.edges:
      if e.is_control:
        continue
      key = (e.src, e.src_output)
      by_tensor.setdefault(key, [])
      if e.dst not in by_tensor[key]:
        by_tensor[key].append(e.dst)
      nbytes[key] = e.bytes
    keys = sorted(by_tensor)
    producer = np.array([k[0] for k in keys], dtype=np.int32)
    size = np.array([nbytes[k] for k in keys], dtype=np.int64)
    counts = np.array([len(by_tensor[k]) for k in keys], dtype=np.int64)
    ptr = np.zeros(len(keys) + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    consumers = np.array([c for k in keys for c in by_tensor[k]], dtype=np.int32)
    return producer, size, ptr, consumers

  # ---- identity ----------------------------------------------------------

  @functools.cached_property
  def fingerprint(self) -> str:
    """A stable hash of op names, types and edges (not of device fields)."""
    h = hashlib.sha256()
    for op in self.ops:
      h.update(op.name.encode())
      h.update(b"\0")
      h.update(op.type.encode())
      h.update(b"\1")
    src, dst, out, _ = self.edge_arrays
    h.update(np.stack([src, dst, out]).tobytes() if len(src) else b"")
    return h.hexdigest()[:16]

  def save(self, path: str) -> None:
    """Writes the graph to `path`, atomically, for every verb and
    `import_graph` to read: a MetaGraphDef (with the step's train_op,
    losses and init_op collections) when `path` ends with .meta or
    .meta.pbtxt, else a GraphDef; text when it ends with .pbtxt
    (`tfplace import --out` writes the same)."""
    from tfplace.graph import graph_io  # pylint: disable=import-outside-toplevel
    graph_io.write_op_graph(self, path)

  def summary(self) -> Dict[str, object]:
    """Counts for `tfplace info`: ops, edges, groups, bytes, FLOPs, types."""
    type_counts: Dict[str, int] = {}
    for t in self.op_types:
      type_counts[t] = type_counts.get(t, 0) + 1
    sizes = [len(g) for g in self.colocation_groups]
    return {
        "name": self.name,
        "fingerprint": self.fingerprint,
        "num_ops": self.num_ops,
        "num_edges": self.num_edges,
        "num_control_edges": sum(1 for e in self.edges if e.is_control),
        "num_colocation_groups": len(sizes),
        "num_multi_op_groups": sum(1 for s in sizes if s > 1),
        "largest_group": max(sizes),
        "param_bytes": int(self.param_bytes.sum()),
        "activation_bytes": int(self.output_bytes.sum()),
        "flops": float(self.flops.sum()),
        "num_control_flow_ops": sum(op.is_control_flow for op in self.ops),
        "loops": {op.name: {"trip_count": op.body.trip_count,
                            "source": op.body.trip_count_source,
                            "flops": op.body.flops}
                  for op in self.ops
                  if op.body is not None and op.body.trip_count is not None},
        "train_ops": list(self.fetches.train_ops),
        "loss": self.fetches.loss,
        "op_types": dict(sorted(type_counts.items(), key=lambda kv: -kv[1])),
    }


def _csr(keys: np.ndarray, values: np.ndarray, n: int):
  order = np.argsort(keys, kind="stable")
  ptr = np.zeros(n + 1, dtype=np.int64)
  np.cumsum(np.bincount(keys, minlength=n), out=ptr[1:])
  return ptr, values[order].astype(np.int32)


def _renumber(groups: np.ndarray) -> np.ndarray:
  """Relabels group ids to 0..G-1 in order of first appearance."""
  _, first, inverse = np.unique(groups, return_index=True, return_inverse=True)
  rank = np.empty(len(first), dtype=np.int32)
  rank[np.argsort(first, kind="stable")] = np.arange(len(first), dtype=np.int32)
  return rank[inverse].astype(np.int32)
