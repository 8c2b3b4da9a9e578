"""k-way graph partitioning of a group graph with METIS (pymetis).

Shared by the METIS min-cut placer (`tfplace.placers.min_cut`) and the
coarsening to K groups (`tfplace.grouping.coarsen`): vertex weight = compute
time, edge weight = bytes crossing, so parts balance compute while cutting
few bytes (Karypis & Kumar, A fast and high quality multilevel scheme for
partitioning irregular graphs, SIAM J. Sci. Comput. 1998).
"""

import contextlib
import os
import sys
from typing import Optional, Tuple

import numpy as np

from tfplace.grouping.group_graph import GroupGraph

# Integer weights are scaled so the largest is 2**20, keeping sums well inside
# 32-bit integers.
MAX_WEIGHT = 2**20


def int_weights(values: np.ndarray) -> np.ndarray:
  """Positive integers proportional to `values`, at most `MAX_WEIGHT`."""
  values = np.asarray(values, dtype=np.float64)
  top = values.max() if len(values) else 0.0
  if top <= 0:
    return np.ones(len(values), dtype=np.int64)
  return np.maximum(1, np.round(values / top * MAX_WEIGHT)).astype(np.int64)


def undirected_csr(src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray,
                   num_vertices: int) -> Tuple[np.ndarray, np.ndarray,
                                               np.ndarray]:
  """Symmetric CSR adjacency (ptr [V+1], nbr [2E'], bytes [2E']).

  Both directions of a pair are merged into one undirected edge whose weight
  is the sum of the bytes of both directions (self loops must not occur).
  """
  g = num_vertices
  lo = np.minimum(src, dst).astype(np.int64)
  hi = np.maximum(src, dst).astype(np.int64)
  keys, inverse = np.unique(lo * g + hi, return_inverse=True)
  weight = np.bincount(inverse, weights=nbytes,
                       minlength=len(keys)).astype(np.int64)
  a, b = keys // g, keys % g
  both_src = np.concatenate([a, b])
  both_dst = np.concatenate([b, a])
  w = np.concatenate([weight, weight])
  order = np.lexsort((both_dst, both_src))
  ptr = np.zeros(g + 1, dtype=np.int64)
  np.cumsum(np.bincount(both_src, minlength=g), out=ptr[1:])
  return ptr, both_dst[order].astype(np.int64), w[order]


def induced_csr(groups: GroupGraph, keep: np.ndarray):
  """Undirected CSR of the subgraph of the groups `keep` (ids, ascending),
  numbered 0..len(keep)-1 in that order."""
  local = np.full(groups.num_groups, -1, dtype=np.int64)
  local[keep] = np.arange(len(keep))
  inside = (local[groups.edge_src] >= 0) & (local[groups.edge_dst] >= 0)
  return undirected_csr(local[groups.edge_src[inside]],
                        local[groups.edge_dst[inside]],
                        groups.edge_bytes[inside], len(keep))


def metis_parts(ptr: np.ndarray, nbr: np.ndarray, vweight: np.ndarray,
                eweight: np.ndarray, nparts: int,
                seed: Optional[int]) -> np.ndarray:
  """Part id (0..nparts-1) per vertex of an undirected CSR graph.

  Args:
    ptr, nbr: the CSR adjacency (both directions).
    vweight, eweight: positive integer vertex and edge weights.
    nparts: number of parts.
    seed: METIS's random seed (None: 0).
  """
  import pymetis  # Lazy: only partitioning needs it.
  if len(nbr) == 0:
    return np.arange(len(vweight)) % nparts
  options = pymetis.Options()
  options.seed = int(seed or 0)
  adjacency = pymetis.CSRAdjacency(ptr.tolist(), nbr.tolist())
  with _c_stdout_silenced():  # METIS prints when it leaves a part empty.
    _, parts = pymetis.part_graph(
        nparts, adjacency, vweights=vweight.tolist(),
        eweights=eweight.tolist(), options=options)
  return np.asarray(parts)


@contextlib.contextmanager
def _c_stdout_silenced():
  """Sends the C library's stdout (file descriptor 1) to /dev/null."""
  sys.stdout.flush()
  saved = os.dup(1)
  try:
    with open(os.devnull, "wb") as null:
      os.dup2(null.fileno(), 1)
    yield
  finally:
    os.dup2(saved, 1)
    os.close(saved)
