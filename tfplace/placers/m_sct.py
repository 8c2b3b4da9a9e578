"""m-SCT: memory-constrained Small Communication Time scheduling (Baechi).

SCT (Hanen and Munier, "An approximation algorithm for scheduling dependent
tasks on m processors with small communication delays", 1995/2001) is ETF
plus "favourite children": for each op, at most one child that should run
right after it on the same device, so that their tensor never crosses a link.

LP relaxation solved here (SciPy `linprog(method="highs")`), one variable per
deduplicated edge plus one per op:

    minimize    w
    subject to  s_i + p_i + c_ij x_ij <= s_j     for each edge (i, j)
                s_i + p_i <= w                    for each sink i
                sum_{j in succ(i)} x_ij >= |succ(i)| - 1   (ops with >= 2 children)
                sum_{i in pred(j)} x_ij >= |pred(j)| - 1   (ops with >= 2 parents)
                0 <= x_ij <= 1,  s_i >= 0

x_ij = 0 means "j is i's favourite child" (no communication on that edge).
p_i is the op's fastest allowed compute time, c_ij the edge's bytes over the
mean candidate link (latency + bytes / bandwidth). Rounding: x_ij < 0.5 makes
j the favourite child of i; the two sum constraints guarantee at most one
favourite child per op and at most one favourite parent per op after rounding.
The edges are the data edges (op pairs that pass a tensor, bytes summed);
control edges move nothing, so they are left out of the LP (this loosens the
start-time constraints a little but keeps the LP small: Inception-V3's
training graph has ~176K control edges and only ~14K data edges).

Scheduling: m-ETF (see `m_etf.py`), except that when an op becomes ready, its
favourite parent is still the last op scheduled on its device, and its data
is all there when that parent finishes (so the device would not idle), the
op is "urgent" and is scheduled next on that device, right after the parent
(if its colocation group and memory allow).

Size limit: the LP has E + M + 1 variables; for graphs with more than
`BaechiOptions.max_lp_edges` (default 50,000) deduplicated data edges the LP is
skipped, a log message says so, and the result is m-ETF's placement.
"""

import time
from typing import List, Optional, Tuple

import numpy as np
from absl import logging
from scipy import optimize, sparse

from tfplace.placers import baechi_common as common
from tfplace.placers.m_etf import EtfScheduler
from tfplace.placers.registry import register_placer


@register_placer("m_sct")
class MSctPlacer(common.BaechiPlacer):
  """Baechi's m-SCT placer.

  Paper: Jeon, Liu, Xu et al., "Baechi: Fast Device Placement of Machine
  Learning Graphs", ACM SoCC 2020 (m-SCT; SCT from Hanen and Munier 1995).
  """

  name = "m_sct"

  def device_ids(self, view: common.OpView) -> np.ndarray:
    num_edges = int((view.pred_bytes > 0).sum())
    if num_edges > self.options.max_lp_edges:
      logging.info("m-SCT: %d edges > max_lp_edges=%d; the LP is skipped and "
                   "m-ETF's placement is used", num_edges,
                   self.options.max_lp_edges)
      return EtfScheduler(view).run()
    return SctScheduler(view, favourite_children(view)).run()


def favourite_children(view: common.OpView) -> np.ndarray:
  """int [M]: the favourite child of each op by the rounded LP, -1 if none."""
  start = time.perf_counter()
  favourite = np.full(view.num_ops, -1, dtype=np.int64)
  data = view.pred_bytes > 0  # Control-only pairs move nothing.
  e_src = view.pred_src[data]
  e_dst = np.repeat(np.arange(view.num_ops), np.diff(view.pred_ptr))[data]
  if not len(e_src):
    return favourite
  latency, bandwidth = view.mean_link()
  comm = latency + view.pred_bytes[data] / bandwidth
  p = np.where(np.isfinite(view.min_compute), view.min_compute, 0.0)
  x = _solve_lp(view.num_ops, e_src, e_dst, p, comm)
  chosen = x < 0.5
  favourite[e_src[chosen]] = e_dst[chosen]
  logging.info("m-SCT: LP with %d edges solved in %.2f s; %d favourite children",
               len(e_src), time.perf_counter() - start, int(chosen.sum()))
  return favourite


def _solve_lp(m: int, e_src: np.ndarray, e_dst: np.ndarray, p: np.ndarray,
              comm: np.ndarray) -> np.ndarray:
  """Solves the relaxation; returns x [E] (1 = communicate on that edge)."""
  e = len(e_src)
  n = e + m + 1  # Variables: x [E], s [M], w.
  rows: List[np.ndarray] = []
  cols: List[np.ndarray] = []
  vals: List[np.ndarray] = []
  rhs: List[np.ndarray] = []
  idx = np.arange(e)
  # s_i - s_j + c_ij x_ij <= -p_i.
  rows += [idx, idx, idx]
  cols += [e + e_src, e + e_dst, idx]
  vals += [np.ones(e), -np.ones(e), comm]
  rhs.append(-p[e_src])
  # s_i - w <= -p_i for sinks.
  sinks = np.setdiff1d(np.arange(m), e_src)
  r = e + np.arange(len(sinks))
  rows += [r, r]
  cols += [e + sinks, np.full(len(sinks), n - 1)]
  vals += [np.ones(len(sinks)), -np.ones(len(sinks))]
  rhs.append(-p[sinks])
  base = e + len(sinks)
  for ends in (e_src, e_dst):  # -sum x <= 1 - degree, for degree >= 2.
    degree = np.bincount(ends, minlength=m)
    many = np.flatnonzero(degree >= 2)
    row_of = np.full(m, -1)
    row_of[many] = base + np.arange(len(many))
    use = row_of[ends] >= 0
    rows.append(row_of[ends][use])
    cols.append(idx[use])
    vals.append(-np.ones(int(use.sum())))
    rhs.append(1.0 - degree[many])
    base += len(many)
  a_ub = sparse.csr_matrix((np.concatenate(vals), (np.concatenate(rows),
                                                   np.concatenate(cols))),
                           shape=(base, n))
  cost = np.zeros(n)
  cost[-1] = 1.0
  bounds = np.zeros((n, 2))
  bounds[:e, 1] = 1.0
  bounds[e:, 1] = np.inf
  result = optimize.linprog(cost, A_ub=a_ub, b_ub=np.concatenate(rhs),
                            bounds=bounds, method="highs")
  if result.status != 0 or result.x is None:
    logging.warning("m-SCT: LP not solved (%s); no favourite children",
                    result.message)
    return np.ones(e)
  return result.x[:e]


class SctScheduler(EtfScheduler):
  """ETF that schedules a ready favourite child right after its parent."""

  def __init__(self, view: common.OpView, favourite: np.ndarray):
    super().__init__(view)
    self.favourite_parent = np.full(view.num_ops, -1, dtype=np.int64)
    has = np.flatnonzero(favourite >= 0)
    self.favourite_parent[favourite[has]] = has
    self.urgent: List[Tuple[int, int]] = []

  def _on_ready(self, op: int) -> None:
    parent = self.favourite_parent[op]
    if parent >= 0:
      d = self.device_of[parent]
      if (self.last_op[d] == parent and
          self.data_ready[op, d] <= self.finish[parent]):
        self.urgent.append((op, int(d)))

  def _urgent(self) -> Optional[Tuple[int, int]]:
    best, choice = None, None
    keep = []
    for op, d in self.urgent:
      parent = self.favourite_parent[op]
      if self.last_op[d] != parent or not self.can_go(op, d):
        continue
      keep.append((op, d))
      key = (self.start_time(op, d), d)
      if best is None or key < best:
        best, choice = key, (op, d)
    self.urgent = [item for item in keep if item != choice]
    return choice
