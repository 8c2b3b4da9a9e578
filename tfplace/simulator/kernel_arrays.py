"""The graph-side arrays the simulator kernel reads, for a set of ops.

`graph_arrays(graph)` lays out the whole graph for `kernel.run_one`;
`restrict(arrays, keep)` renumbers them to a subset of the ops that is
closed under predecessors (the kernel's op j is then the graph's op
`ops[j]`). The simulator restricts to the training step when the ops outside
it can provably not change any result (see `Simulator`), which halves the
work on graphs with a large initialization subgraph (Inception-V3: 5,334 of
11,282 ops run in a step).
"""

import dataclasses

import numpy as np

from tfplace.graph.op_graph import OpGraph
from tfplace.simulator import (dead_accumulators, kernel_state,
                               replicated_constants)

@dataclasses.dataclass(frozen=True, eq=False)
class GraphArrays:
  """Graph-side kernel arrays (all int64 unless noted); see `kernel.py`.

  Attributes:
    ops: [m] the graph op id of each simulated op (ascending).
    topo: [m] simulated ops in topological order.
    rank: [m] position of each simulated op in `topo`.
    succ_ptr, succ: successors (data and control edges) as CSR.
    pred_count: [m] predecessors per op (CSR entries, duplicates counted).
    t_prod: [T] producer of each tensor (sorted); t_bytes: float64 [T].
    t_repl: bool [T], a small constant TF copies to its consumers' devices
      when they span two hosts (`replicated_constants`).
    c_ptr, cons: the unique consumers of each tensor (CSR).
    in_ptr, in_entry: the consumer entries each op reads (CSR).
    entry_tensor: [C] the tensor of each consumer entry.
    ctrl_ptr, ctrl_dst: unique control-edge successors of each op (CSR).
  """
  ops: np.ndarray
  topo: np.ndarray
  rank: np.ndarray
  succ_ptr: np.ndarray
  succ: np.ndarray
  pred_count: np.ndarray
  t_prod: np.ndarray
  t_bytes: np.ndarray
  t_repl: np.ndarray
  c_ptr: np.ndarray
  cons: np.ndarray
  in_ptr: np.ndarray
  in_entry: np.ndarray
  entry_tensor: np.ndarray
  ctrl_ptr: np.ndarray
  ctrl_dst: np.ndarray

  @property
  def num_ops(self) -> int:
    return len(self.ops)

  def kernel_graph(self) -> kernel_state.KernelGraph:
    """The arrays as the kernel reads them, with per-input copies of the
    tensor producer and bytes (read in order while an op finishes)."""
    tensor = self.entry_tensor[self.in_entry]
    entry_in = np.empty(len(self.in_entry), np.int64)
    entry_in[self.in_entry] = np.arange(len(self.in_entry), dtype=np.int64)
    return kernel_state.KernelGraph(
        ops=self.ops, topo=self.topo, rank=self.rank, succ_ptr=self.succ_ptr,
        succ=self.succ, pred_count=self.pred_count, t_prod=self.t_prod,
        t_bytes=self.t_bytes, c_ptr=self.c_ptr, cons=self.cons,
        in_ptr=self.in_ptr, in_entry=self.in_entry,
        in_prod=self.t_prod[tensor], in_bytes=self.t_bytes[tensor],
        entry_in=entry_in, ctrl_ptr=self.ctrl_ptr, ctrl_dst=self.ctrl_dst)

  @property
  def num_entries(self) -> int:
    return len(self.cons)


def graph_arrays(graph: OpGraph) -> GraphArrays:
  """The arrays of every op of `graph`.

  Loop back edges are dropped, and so is everything outside the training
  step (`OpGraph.step_mask`): a tensor whose producer the step does not run,
  and a consumer entry of an op the step does not run (e.g. a variable's
  handle read by its initializer) cause no transfer; nor do the step's
  loop accumulators TF prunes (`dead_accumulators`), which still run
  before their loop.
  """
  live = graph.step_mask & ~dead_accumulators.dead_ops(graph,
                                                       graph.step_mask)
  m = graph.num_ops
  topo = graph.topo_order.astype(np.int64)
  rank = np.empty(m, np.int64)
  rank[topo] = np.arange(m, dtype=np.int64)
  succ_ptr, succ = graph.successors_csr
  pred_count = np.diff(graph.predecessors_csr[0]).astype(np.int64)
  tensors = _tensor_arrays(graph, live)
  tensors["t_repl"] = replicated_constants.replicable_constants(
      graph, live)[tensors["t_prod"]]
  ctrl_ptr, ctrl_dst = _control_arrays(graph, live)
  return GraphArrays(
      ops=np.arange(m, dtype=np.int64), topo=topo, rank=rank,
      succ_ptr=succ_ptr.astype(np.int64), succ=succ.astype(np.int64),
      pred_count=pred_count, **tensors, ctrl_ptr=ctrl_ptr, ctrl_dst=ctrl_dst)


def _tensor_arrays(graph: OpGraph, step: np.ndarray) -> dict:
  """Tensors sorted by producer and, per op, the consumer entries it reads
  (of the ops in `step` only)."""
  producer, nbytes, ptr, consumers = graph.tensors
  is_back_op = graph.is_back_edge_source
  order = np.argsort(producer, kind="stable")
  order = order[~is_back_op[producer[order]] & step[producer[order]]]
  rank = np.full(len(producer), -1, np.int64)
  rank[order] = np.arange(len(order), dtype=np.int64)
  entry_rank = np.repeat(rank, np.diff(ptr))
  kept = np.flatnonzero((entry_rank >= 0) & step[consumers])
  kept = kept[np.argsort(entry_rank[kept], kind="stable")]
  c_ptr = np.zeros(len(order) + 1, np.int64)
  np.cumsum(np.bincount(entry_rank[kept], minlength=len(order)),
            out=c_ptr[1:])
  cons = consumers[kept].astype(np.int64)
  in_ptr = np.zeros(graph.num_ops + 1, np.int64)
  np.cumsum(np.bincount(cons, minlength=graph.num_ops), out=in_ptr[1:])
  return dict(t_prod=producer[order].astype(np.int64),
              t_bytes=nbytes[order].astype(np.float64), c_ptr=c_ptr,
              cons=cons, in_ptr=in_ptr,
              in_entry=np.argsort(cons, kind="stable").astype(np.int64),
              entry_tensor=entry_rank[kept])


def _control_arrays(graph: OpGraph, step: np.ndarray):
  """Unique control-edge successors per op (CSR; loop back edges and
  edges outside `step` dropped)."""
  back = set(np.flatnonzero(graph.is_back_edge_source))
  pairs = sorted({(e.src, e.dst) for e in graph.edges
                  if e.is_control and e.src not in back and step[e.src]
                  and step[e.dst]})
  src = np.array([p[0] for p in pairs], dtype=np.int64)
  ctrl_dst = np.array([p[1] for p in pairs], dtype=np.int64)
  ctrl_ptr = np.zeros(graph.num_ops + 1, np.int64)
  np.cumsum(np.bincount(src, minlength=graph.num_ops), out=ctrl_ptr[1:])
  return ctrl_ptr, ctrl_dst


def _filter_csr(ptr: np.ndarray, values: np.ndarray, rows: np.ndarray,
                new_id: np.ndarray):
  """CSR of `rows` only, values renumbered by `new_id` and those mapped to
  -1 dropped (order kept)."""
  counts = np.diff(ptr)
  row_of = np.repeat(np.arange(len(counts)), counts)
  new_row = np.full(len(counts), -1, np.int64)
  new_row[rows] = np.arange(len(rows), dtype=np.int64)
  keep = (new_row[row_of] >= 0) & (new_id[values] >= 0)
  out_ptr = np.zeros(len(rows) + 1, np.int64)
  np.cumsum(np.bincount(new_row[row_of[keep]], minlength=len(rows)),
            out=out_ptr[1:])
  return out_ptr, new_id[values[keep]].astype(np.int64)


def restrict(arrays: GraphArrays, keep: np.ndarray) -> GraphArrays:
  """The arrays of the ops where `keep` is True, renumbered in op order.

  Args:
    arrays: `graph_arrays` of the whole graph.
    keep: bool [M]; must be closed under predecessors, and every tensor and
      control edge must lie inside it (true of `OpGraph.step_mask`).

  Raises:
    ValueError: if `keep` does not satisfy that.
  """
  ops = np.flatnonzero(keep).astype(np.int64)
  new_id = np.full(len(keep), -1, np.int64)
  new_id[ops] = np.arange(len(ops), dtype=np.int64)
  succ_ptr, succ = _filter_csr(arrays.succ_ptr, arrays.succ, ops, new_id)
  pred_count = np.bincount(succ, minlength=len(ops)).astype(np.int64)
  inside = [arrays.t_prod, arrays.cons, arrays.ctrl_dst]
  if (not np.array_equal(pred_count, arrays.pred_count[ops])
      or any((new_id[a] < 0).any() for a in inside)):
    raise ValueError("the ops to keep are not closed under predecessors")
  topo = new_id[arrays.topo[keep[arrays.topo]]]
  rank = np.empty(len(ops), np.int64)
  rank[topo] = np.arange(len(ops), dtype=np.int64)
  in_ptr, in_entry = _filter_csr(arrays.in_ptr, arrays.in_entry, ops,
                                 np.arange(len(arrays.in_entry)))
  ctrl_ptr, ctrl_dst = _filter_csr(arrays.ctrl_ptr, arrays.ctrl_dst, ops,
                                   new_id)
  return dataclasses.replace(
      arrays, ops=ops, topo=topo, rank=rank, succ_ptr=succ_ptr, succ=succ,
      pred_count=pred_count, t_prod=new_id[arrays.t_prod],
      cons=new_id[arrays.cons], in_ptr=in_ptr, in_entry=in_entry,
      ctrl_ptr=ctrl_ptr, ctrl_dst=ctrl_dst)
