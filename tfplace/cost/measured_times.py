"""Measured per-op times in place of a model's estimates.

`ProfiledCostModel`: per-op measured seconds (op name -> device type ->
seconds) override a fallback model for the ops that were measured.
"""

import dataclasses
from typing import Mapping, Optional

import numpy as np

from tfplace.cost.cluster import Cluster
from tfplace.cost.op_costs import CostModel, OpCosts
from tfplace.graph.op_graph import OpGraph


class ProfiledCostModel(CostModel):
  """Measured per-op times where known, a fallback model elsewhere."""

  name = "profiled"

  def __init__(self, op_times: Mapping[str, Mapping[str, float]],
               fallback: CostModel, scale: Optional[Mapping[str, float]] = None):
    """Builds the model.

    Args:
      op_times: op name -> device type -> measured seconds.
      fallback: model for ops (or device types) not measured.
      scale: device type -> factor on measured times (default 1).
    """
    self.op_times = op_times
    self.fallback = fallback
    self.scale = dict(scale or {})

  def estimate(self, graph: OpGraph, cluster: Cluster) -> OpCosts:
    base = self.fallback.estimate(graph, cluster)
    seconds = base.compute_s.copy()
    columns = {}
    for j, d in enumerate(cluster.devices):
      columns.setdefault(d.type, []).append(j)
    for name, per_type in self.op_times.items():
      i = graph.index.get(name)
      if i is None:
        continue
      for dtype, t in per_type.items():
        cols = columns.get(dtype, [])
        keep = np.isfinite(seconds[i, cols])  # no kernel stays inf
        seconds[i, np.asarray(cols)[keep]] = float(t) * self.scale.get(dtype, 1.0)
    return dataclasses.replace(base, compute_s=seconds)
