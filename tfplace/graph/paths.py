"""Longest paths through the op DAG: the one routine behind critical paths,
lower bounds and list-scheduling priorities.

Every op `i` takes `op_time[i]`; edges are the DAG view of `OpGraph` (data
and control edges, loop back edges left out).

  * `top_levels`: finish time of each op if every op started as soon as its
    predecessors finished (longest path from a source, the op included),
    with the predecessor on that path.
  * `bottom_levels`: longest path from each op to a sink, the op included
    (the "b-level" priority of list schedulers).
  * `critical_path`: the ops of the longest source-to-sink path and its length.
"""

from typing import Tuple

import numpy as np

from tfplace.graph.op_graph import OpGraph


def top_levels(graph: OpGraph,
               op_time: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
  """(finish [M], parent [M]): longest-path finish time of each op and the
  predecessor it waits for (-1 for none; ties: the first in CSR order)."""
  ptr, preds = graph.predecessors_csr
  finish = np.zeros(graph.num_ops)
  parent = np.full(graph.num_ops, -1, dtype=np.int64)
  for i in graph.topo_order:
    p = preds[ptr[i]:ptr[i + 1]]
    if len(p):
      best = p[np.argmax(finish[p])]
      finish[i] = finish[best] + op_time[i]
      parent[i] = best
    else:
      finish[i] = op_time[i]
  return finish, parent


def bottom_levels(graph: OpGraph, op_time: np.ndarray) -> np.ndarray:
  """float64 [M]: longest path from each op to a sink, the op included."""
  ptr, succ = graph.successors_csr
  out = np.asarray(op_time, dtype=np.float64).copy()
  for i in graph.topo_order[::-1]:
    a, b = ptr[i], ptr[i + 1]
    if b > a:
      out[i] = op_time[i] + out[succ[a:b]].max()
  return out


def critical_path(graph: OpGraph,
                  op_time: np.ndarray) -> Tuple[np.ndarray, float]:
  """(op ids of the longest source-to-sink path, source first; its length)."""
  if graph.num_ops == 0:
    return np.zeros(0, dtype=np.int32), 0.0
  finish, parent = top_levels(graph, op_time)
  path = [int(np.argmax(finish))]
  while parent[path[-1]] >= 0:
    path.append(int(parent[path[-1]]))
  return np.array(path[::-1], dtype=np.int32), float(finish.max())
