"""Per-op, per-device costs: the input of the simulator and of every placer.

A `CostModel` turns (graph, cluster) into `OpCosts`. The analytical model lives
in `analytical.py`; profiled costs (measured per-op times) plug in through the
same interface (`profiled.py`).
"""

import abc
import dataclasses

import numpy as np

from tfplace.cost.cluster import Cluster
from tfplace.graph.op_graph import OpGraph


@dataclasses.dataclass(frozen=True)
class OpCosts:
  """Costs of one graph on one cluster.

  Attributes:
    compute_s: float64 [M, D], seconds op i takes on device j (inf where the
      device type has no kernel for the op).
    param_bytes: int64 [M], persistent bytes (variables, optimizer slots).
    output_bytes: int64 [M], bytes of the op's outputs (activations).
  """
  compute_s: np.ndarray
  param_bytes: np.ndarray
  output_bytes: np.ndarray

  @property
  def num_ops(self) -> int:
    return self.compute_s.shape[0]

  @property
  def num_devices(self) -> int:
    return self.compute_s.shape[1]


class CostModel(abc.ABC):
  """Estimates `OpCosts` for a graph on a cluster."""

  name: str = "cost_model"

  @abc.abstractmethod
  def op_costs(self, graph: OpGraph, cluster: Cluster) -> OpCosts:
    """Returns the costs of every op of `graph` on every device of `cluster`."""
