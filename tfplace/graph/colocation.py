"""Colocation groups: sets of ops placed on one device, because TensorFlow
requires it or (a loop and its neighbours) runs them far slower apart.

These sources, merged by union-find (all but the last as TensorFlow's placer
does):
  * `_class` attrs ("loc:@x": colocate with op x);
  * resource edges (an op consuming a DT_RESOURCE tensor runs with the op that
    produced the handle) and ref edges (VariableV2 -> Assign / ApplyX);
  * tf.data edges: a dataset (a DT_VARIANT made by a `*Dataset*` op) runs
    where it is consumed (TF's placer refuses "Cannot colocate nodes
    IteratorV2 and RepeatDataset" otherwise), so an input pipeline and its
    iterator form one group;
  * TF1 loop frames: Enter/Exit/Switch/Merge/NextIteration/LoopCond and every
    op between them in one frame (nested frames join their outer frame);
  * functional loops (While, StatelessWhile) with the ops whose tensors they
    take or give (data edges). Not a TensorFlow rule but its cost: a tensor
    that crosses devices into or out of a loop makes TF run the loop on both
    devices, trip by trip. Measured on a Keras LSTM (`keras_lstm`, 20
    trips): one input from another TF server added ~1 ms per trip, the loop
    apart from all its inputs and outputs 5.8 ms per trip (a 6 ms step took
    122 ms); in one process with two CPU devices 0.35 ms per trip.
"""

from typing import List, Sequence

import numpy as np
from absl import logging

from tfplace.graph.function_bodies import WHILE_OPS
from tfplace.graph.op_graph import LOOP_BACK_OPS, Edge, Op

# Op types whose ref-typed inputs are real refs (they write the variable).
_REF_CONSUMER_PREFIXES = ("Assign", "Apply", "SparseApply", "Scatter",
                          "Ref", "CountUpTo", "IsVariableInitialized",
                          "DestroyTemporaryVariable")


class _UnionFind:
  """Union-find with path halving over 0..n-1."""

  def __init__(self, n: int):
    self.parent = np.arange(n, dtype=np.int64)

  def find(self, i: int) -> int:
    parent = self.parent
    while parent[i] != i:
      parent[i] = parent[parent[i]]
      i = parent[i]
    return int(i)

  def union(self, a: int, b: int) -> None:
    ra, rb = self.find(a), self.find(b)
    if ra != rb:
      self.parent[max(ra, rb)] = min(ra, rb)


def colocation_groups(ops: Sequence[Op], edges: Sequence[Edge]) -> np.ndarray:
  """Colocation group id per op.

  Args:
    ops: the ops, index = op id.
    edges: data and control edges between op ids.

  Returns:
    int32 array [M]: group id per op (ids are representative op indices;
    `OpGraph` renumbers them 0..G-1).
  """
  uf = _UnionFind(len(ops))
  index = {op.name: i for i, op in enumerate(ops)}
  for i, op in enumerate(ops):
    for name in op.colocation_names:
      if name in index:
        uf.union(i, index[name])
      else:
        logging.warning("op %s asks to be colocated with unknown op %s",
                        op.name, name)
  for e in edges:
    if not e.is_control and (_is_resource_or_ref_edge(ops, e)
                             or ops[e.src].type in WHILE_OPS
                             or ops[e.dst].type in WHILE_OPS):
      uf.union(e.src, e.dst)
  _union_loop_frames(ops, edges, uf)
  groups = np.array([uf.find(i) for i in range(len(ops))], dtype=np.int32)
  sizes = np.bincount(groups, minlength=len(ops))
  logging.info("colocation: %d ops in %d groups, %d of them multi-op "
               "(largest %d ops)", len(ops), int(np.count_nonzero(sizes)),
               int(np.count_nonzero(sizes > 1)), int(sizes.max(initial=0)))
  return groups


def _is_resource_or_ref_edge(ops: Sequence[Op], e: Edge) -> bool:
  dtypes = ops[e.src].output_dtypes
  if e.src_output >= len(dtypes):
    return False
  dtype = dtypes[e.src_output]
  if dtype == "resource":
    return True
  if dtype == "variant" and "Dataset" in ops[e.src].type:
    return True
  return (dtype.endswith("_ref") and
          ops[e.dst].type.startswith(_REF_CONSUMER_PREFIXES))


def _frame_depths(ops: Sequence[Op], edges: Sequence[Edge]) -> np.ndarray:
  """Loop nesting depth of each op's outputs (0 = not in a TF1 loop).

  Walks the graph in topological order without NextIteration back edges:
  an op lives at the deepest depth among its inputs; Enter goes one level
  in, Exit's outputs one level out.
  """
  m = len(ops)
  succ: List[List[int]] = [[] for _ in range(m)]
  indeg = np.zeros(m, dtype=np.int64)
  for e in edges:
    if ops[e.src].type in LOOP_BACK_OPS:
      continue
    succ[e.src].append(e.dst)
    indeg[e.dst] += 1
  depth = np.zeros(m, dtype=np.int64)     # depth the op runs at
  out_depth = np.zeros(m, dtype=np.int64)  # depth of its outputs
  order = list(np.flatnonzero(indeg == 0))
  head = 0
  while head < len(order):
    i = order[head]
    head += 1
    kind = ops[i].type
    if kind in ("Enter", "RefEnter"):
      depth[i] += 1
    out_depth[i] = depth[i] - 1 if kind in ("Exit", "RefExit") else depth[i]
    for j in succ[i]:
      depth[j] = max(depth[j], out_depth[i])
      indeg[j] -= 1
      if indeg[j] == 0:
        order.append(j)
  return out_depth


def _union_loop_frames(ops: Sequence[Op], edges: Sequence[Edge],
                       uf: _UnionFind) -> None:
  if not any(op.type in ("Enter", "RefEnter") for op in ops):
    return
  out_depth = _frame_depths(ops, edges)
  for e in edges:
    # A tensor (or control signal) inside a loop frame ties both ends.
    if out_depth[e.src] >= 1 or ops[e.src].type in LOOP_BACK_OPS:
      uf.union(e.src, e.dst)
