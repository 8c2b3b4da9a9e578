"""The interface every placer shares: heuristics and learned placers alike."""

import abc
from typing import Optional

from tfplace.cost.cluster import Cluster
from tfplace.cost.op_costs import OpCosts
from tfplace.graph.op_graph import OpGraph
from tfplace.placement import Placement


class Placer(abc.ABC):
  """Assigns every op of a graph to a device of a cluster.

  Subclasses set `name` (the CLI name, e.g. "m_etf") and implement `place`.
  A placer must return a placement that passes `Placement.validate(graph,
  cluster)`: colocation groups whole, kernels available. It should respect
  device memory where it can (a placement that cannot fit is reported by the
  simulator as infeasible, never silently accepted).
  """

  name: str = "placer"

  @abc.abstractmethod
  def place(self, graph: OpGraph, cluster: Cluster, costs: OpCosts,
            seed: Optional[int] = None) -> Placement:
    """Returns a placement of `graph` on `cluster` given per-op `costs`."""
