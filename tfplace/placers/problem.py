"""PlacementProblem: what every placer is given.

One graph, one cluster and the op costs on it, with what placers derive from
them built once and shared: the colocation groups as a `GroupGraph`, the
`Simulator`, the lower bound. A search or learned placer evaluates candidate
group placements with `simulate_groups`; every placer returns its result
through `placement`.
"""

import functools
from typing import Optional

import numpy as np

from tfplace.cost.cluster import Cluster
from tfplace.cost.cost_models import default_cost_model
from tfplace.cost.memory import check_model_fits
from tfplace.cost.op_costs import CostModel, OpCosts
from tfplace.errors import PlacementError
from tfplace.graph.op_graph import OpGraph
from tfplace.grouping.group_graph import GroupGraph, build_group_graph
from tfplace.placement import Placement
from tfplace.simulator.lower_bound import lower_bound
from tfplace.simulator.simulator import Simulator


class PlacementProblem:
  """A graph, a cluster, the op costs, and what placers share of them.

  Attributes:
    graph: the training step.
    cluster: the devices.
    costs: per-op costs of `graph` on `cluster` ([M, D]).
  """

  def __init__(self, graph: OpGraph, cluster: Cluster, costs: OpCosts):
    m, d = graph.num_ops, cluster.num_devices
    if costs.compute_s.shape != (m, d):
      raise PlacementError(
          f"costs are for {costs.compute_s.shape} (ops, devices) but the graph "
          f"has {m} ops and the cluster {d} devices")
    self.graph, self.cluster, self.costs = graph, cluster, costs

  @classmethod
  def build(cls, graph: OpGraph, cluster: Cluster,
            cost_model: Optional[CostModel] = None) -> "PlacementProblem":
    """Checks the model can fit the cluster at all, then costs it.

    Raises:
      ClusterError: the model is larger than all devices' memory together.
    """
    check_model_fits(graph, cluster)
    model = cost_model or default_cost_model()
    return cls(graph, cluster, model.op_costs(graph, cluster))

  @functools.cached_property
  def groups(self) -> GroupGraph:
    """The colocation groups (placed whole) as a group graph."""
    return build_group_graph(self.graph, self.costs)

  @functools.cached_property
  def simulator(self) -> Simulator:
    return Simulator(self.graph, self.cluster, self.costs)

  @functools.cached_property
  def lower_bound_s(self) -> float:
    """No placement's simulated step time is below this."""
    return float(lower_bound(self.graph, self.cluster, self.costs))

  def placement(self, group_devices, placer: Optional[str] = None) -> Placement:
    """The placement putting each colocation group on its device id."""
    return Placement.from_array(self.graph, self.cluster,
                                self.groups.expand(group_devices),
                                placer=placer)

  def simulate_groups(self, group_devices: np.ndarray) -> np.ndarray:
    """float64 [B]: simulated step times of group placements [B, G]
    (inf where infeasible).

    One simulator thread: the learned placers call this between TensorFlow
    steps, and numba's OpenMP threads, which spin after a batch, starved
    TensorFlow (Mars with PPO on RNNLM: 26 samples/s on one thread, 6 on
    two; WORKSPACE_NOTES.md, "Faster searches")."""
    batch = np.atleast_2d(group_devices)
    return self.simulator.simulate_batch(self.groups.expand(batch))
