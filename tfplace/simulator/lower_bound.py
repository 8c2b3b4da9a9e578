"""A lower bound on the step time of any placement.

`lower_bound` = max(critical path, work bound) + the cluster's fixed
`step_overhead_s`, with transfers (and their host overheads) and memory
ignored, so no placement can beat it under the simulator's model (every
simulated step pays the step overhead; a placement on one device pays no
transfer cost):

  * critical path: the longest path through the graph (data and control
    edges) where each op takes its time on its fastest device.
  * work bound: the devices together must do all the work. For any device
    weights y >= 0 with sum_d slots_d * y_d = 1,
        T >= sum_i min_d y_d * cost[i, d]
    (the dual of the fractional assignment LP "each op split over devices,
    device d busy at most slots_d * T"). With y uniform this is
    sum_i min_d cost[i, d] / total slots; with y_d proportional to device
    d's speed it is total work / aggregate speed. Both are tried, plus a few
    mixtures, and the largest is kept.

It tells how far any placement can still improve: a placement at the bound is
optimal.
"""

import numpy as np

from tfplace.cost.cluster import Cluster
from tfplace.cost.op_costs import OpCosts
from tfplace.graph import paths
from tfplace.graph.op_graph import OpGraph


def fastest_cost(costs: OpCosts) -> np.ndarray:
  """float64 [M]: each op's time on its fastest device (inf if none can)."""
  return np.min(costs.compute_s, axis=1)


def work_bound(costs: OpCosts, cluster: Cluster) -> float:
  """max over a few device weightings y of sum_i min_d y_d * cost[i, d]."""
  cost = costs.compute_s
  slots = np.array([d.slots for d in cluster.devices], dtype=np.float64)
  finite_rows = np.all(np.isfinite(cost), axis=1)
  if finite_rows.any():
    total = cost[finite_rows].sum(axis=0)
    speed = 1.0 / np.maximum(total, 1e-300)
  else:
    speed = np.ones(cost.shape[1])
  best = 0.0
  for alpha in (0.0, 0.25, 0.5, 0.75, 1.0):
    y = (1 - alpha) * np.ones_like(speed) + alpha * speed / speed.max()
    y = y / np.dot(slots, y)
    best = max(best, float(np.min(y[None, :] * cost, axis=1).sum()))
  return best


def lower_bound(graph: OpGraph, cluster: Cluster, costs: OpCosts) -> float:
  """max(critical path on fastest devices, work bound) + step overhead; see
  module doc."""
  return max(paths.critical_path(graph, fastest_cost(costs))[1],
             work_bound(costs, cluster)) + cluster.step_overhead_s
