"""Synthetic training-step graphs no placer was tuned on (no TensorFlow).

    graph = build_synthetic("towers", seed=3)

`layered_dag`: layers of conv-like ops, each reading 1-3 ops of the two
layers before (a forward pass only, every op its own colocation group).
`towers`: a training step over parallel towers of dense layers with a
different op mix per tower (matmul-heavy, memory-bound elementwise chains,
a CPU-only input op per tower), a shared head, the backward pass mirrored
and each variable colocated with its update (as TF colocates a variable and
its optimizer op), plus an initialization subgraph the step does not run.
Both are seeded and deterministic.
"""

from typing import Callable, Dict, List

import numpy as np

from tfplace.errors import GraphImportError
from tfplace.graph.op_graph import Edge, Op, OpGraph, StepFetches


def layered_dag(num_ops: int = 500, width: int = 20, seed: int = 0) -> OpGraph:
  """A forward-only DAG: layers of `width` ops, each reading 1-3 ops of the
  previous two layers, 64 KiB-2 MiB tensors, 0.1-1 GFLOP and up to 1 MiB of
  parameters per op."""
  rng = np.random.default_rng(seed)
  ops, edges = [], []
  for i in range(num_ops):
    nbytes = int(rng.integers(1 << 16, 1 << 21))
    ops.append(Op(name=f"op{i}", type="Conv2D", output_shapes=((nbytes // 4,),),
                  output_dtypes=("float32",), output_bytes=(nbytes,),
                  param_bytes=int(rng.integers(0, 1 << 20)),
                  flops=float(rng.uniform(1e8, 1e9))))
    layer = i // width
    if layer == 0:
      continue
    lo = max(0, (layer - 2) * width)
    for src in set(rng.integers(lo, layer * width, size=rng.integers(1, 4))):
      edges.append(Edge(int(src), i, 0, ops[int(src)].output_bytes[0]))
  return OpGraph(ops, edges, graph_def=None, name=f"layered{num_ops}")


class _Builder:
  """Appends ops and edges; tracks colocation groups."""

  def __init__(self):
    self.ops: List[Op] = []
    self.edges: List[Edge] = []
    self.group: List[int] = []

  def op(self, name: str, op_type: str, nbytes: int, flops: float = 0.0,
         inputs=(), param_bytes: int = 0, colocate_with: int = -1,
         kernels=frozenset({"CPU", "GPU"})) -> int:
    i = len(self.ops)
    shape = ((max(nbytes // 4, 1),),) if nbytes else ()
    self.ops.append(Op(name=name, type=op_type, output_shapes=shape,
                       output_dtypes=("float32",) if nbytes else (),
                       output_bytes=(nbytes,) if nbytes else (),
                       param_bytes=param_bytes, flops=flops, kernels=kernels))
    self.group.append(self.group[colocate_with] if colocate_with >= 0 else i)
    for src in inputs:
      self.edges.append(Edge(src, i, 0, self.ops[src].output_bytes[0]))
    return i

  def control(self, src: int, dst: int) -> None:
    self.edges.append(Edge(src, dst, -1, 0))


def _tower_forward(b: _Builder, t: int, kind: str, layers: int, batch: int,
                   hidden: int, rng) -> List[tuple]:
  """One tower's forward layers: (input, variable, output) per layer."""
  act = batch * hidden * 4
  x = b.op(f"t{t}/input", "ParseExample", act, 1e6,
           kernels=frozenset({"CPU"}))
  trace = []
  for layer in range(layers):
    name = f"t{t}/l{layer}"
    width = hidden * int(rng.integers(1, 4))
    var = b.op(f"{name}/w", "VarHandleOp", 8, param_bytes=hidden * width * 4)
    read = b.op(f"{name}/read", "ReadVariableOp", hidden * width * 4,
                inputs=(var,), colocate_with=var)
    if kind == "dense":
      y = b.op(f"{name}/matmul", "MatMul", act, 2.0 * batch * hidden * width,
               inputs=(x, read))
    else:  # Memory-bound: a scale and a chain of elementwise ops.
      y = b.op(f"{name}/mul", "Mul", act * 4, batch * hidden, inputs=(x, read))
      for k in range(int(rng.integers(2, 5))):
        y = b.op(f"{name}/ew{k}", "Tanh", act * 4, batch * hidden, inputs=(y,))
    y = b.op(f"{name}/relu", "Relu", act, batch * hidden, inputs=(y,))
    trace.append((x, var, y))
    x = y
  return trace


def _tower_backward(b: _Builder, t: int, trace, grad: int, batch: int,
                    hidden: int) -> List[int]:
  """Mirrors a tower's forward layers; returns its variable updates."""
  updates = []
  act = batch * hidden * 4
  for layer in reversed(range(len(trace))):
    x, var, y = trace[layer]
    name = f"t{t}/l{layer}/grad"
    g_relu = b.op(f"{name}/relu", "ReluGrad", act, batch * hidden,
                  inputs=(grad, y))
    param = b.ops[var].param_bytes
    g_w = b.op(f"{name}/w", "MatMul", param, 2.0 * batch * param / 4,
               inputs=(x, g_relu))
    grad = b.op(f"{name}/x", "MatMul", act, 2.0 * batch * param / 4,
                inputs=(g_relu,))
    updates.append(b.op(f"t{t}/l{layer}/update", "ResourceApplyGradientDescent",
                        0, param / 4, inputs=(var, g_w), colocate_with=var))
  return updates


def towers(num_towers: int = 4, layers: int = 5, batch: int = 64,
           hidden: int = 512, seed: int = 0) -> OpGraph:
  """A training step over `num_towers` towers (see the module docstring)."""
  rng = np.random.default_rng(seed)
  b = _Builder()
  kinds = ["dense" if rng.random() < 0.5 else "elementwise"
           for _ in range(num_towers)]
  traces = [_tower_forward(b, t, kinds[t], layers, batch, hidden, rng)
            for t in range(num_towers)]
  concat = b.op("head/concat", "ConcatV2", batch * hidden * 4 * num_towers,
                inputs=[trace[-1][2] for trace in traces])
  loss = b.op("head/loss", "SoftmaxCrossEntropyWithLogits", 4,
              batch * hidden * num_towers * 5, inputs=(concat,))
  grad = b.op("head/grad", "Fill", batch * hidden * 4 * num_towers,
              inputs=(loss,))
  train = b.op("train", "NoOp", 0)
  for t, trace in enumerate(traces):
    split = b.op(f"t{t}/grad_split", "Slice", batch * hidden * 4, 1e5,
                 inputs=(grad,))
    for update in _tower_backward(b, t, trace, split, batch, hidden):
      b.control(update, train)
  for i, op in enumerate(list(b.ops)):
    if op.type == "VarHandleOp":  # The initializer: not part of the step.
      value = b.op(f"{op.name}/init_value", "RandomStandardNormal",
                   op.param_bytes, op.param_bytes)
      b.op(f"{op.name}/init", "AssignVariableOp", 0, inputs=(i, value),
           colocate_with=i)
  return OpGraph(b.ops, b.edges, graph_def=None, name=f"towers{num_towers}",
                 fetches=StepFetches(train_ops=("train",),
                                     loss="head/loss:0"),
                 colocation_groups=np.array(b.group))


SYNTHETIC_GRAPHS: Dict[str, Callable[..., OpGraph]] = {
    "layered_dag": layered_dag,
    "towers": towers,
}


def build_synthetic(name: str, **kwargs) -> OpGraph:
  """Builds a synthetic graph by name (`SYNTHETIC_GRAPHS`).

  Raises:
    GraphImportError: unknown name or argument.
  """
  if name not in SYNTHETIC_GRAPHS:
    raise GraphImportError(f"unknown synthetic graph {name!r}; choose one of "
                           f"{sorted(SYNTHETIC_GRAPHS)}")
  try:
    return SYNTHETIC_GRAPHS[name](**kwargs)
  except TypeError as e:
    raise GraphImportError(f"synthetic graph {name!r}: {e}") from None
