"""Per-op, per-device costs: the input of the simulator and of every placer.

A `CostModel` turns (graph, cluster) into `OpCosts`. The analytical model lives
in `analytical.py`, the calibrated one in `calibrated.py`; measured per-op times
plug in through the same interface (`measured_times.py`).
"""

import abc
import dataclasses
from typing import Optional

import numpy as np

from tfplace.cost.cluster import Cluster
from tfplace.graph.op_graph import OpGraph


@dataclasses.dataclass(frozen=True)
class OpCosts:
  """Costs of one graph on one cluster.

  Attributes:
    compute_s: float64 [M, D], seconds op i takes on device j (inf where the
      device type has no kernel for the op: every placer and the simulator
      read "may op i run on device j" from here).
    param_bytes: int64 [M], persistent bytes (variables, optimizer slots,
      constants' tensors: `OpGraph.resident_bytes`).
    output_bytes: int64 [M], bytes of the op's outputs (activations).
    scratch_bytes: int64 [M, D], bytes op i's kernel holds on device j only
      while it runs (`tfplace.cost.scratch`); None: none (all zeros).
  """
  compute_s: np.ndarray
  param_bytes: np.ndarray
  output_bytes: np.ndarray
  scratch_bytes: Optional[np.ndarray] = None

  def __post_init__(self):
    if self.scratch_bytes is None:
      object.__setattr__(self, "scratch_bytes",
                         np.zeros(np.shape(self.compute_s), dtype=np.int64))
    elif np.shape(self.scratch_bytes) != np.shape(self.compute_s):
      raise ValueError(f"scratch_bytes has shape "
                       f"{np.shape(self.scratch_bytes)}, compute_s "
                       f"{np.shape(self.compute_s)}")

  @property
  def num_ops(self) -> int:
    return self.compute_s.shape[0]

  @property
  def num_devices(self) -> int:
    return self.compute_s.shape[1]


class CostModel(abc.ABC):
  """Estimates `OpCosts` for a graph on a cluster.

  Subclasses implement `estimate` (what each op would cost if it ran);
  `op_costs` gives the costs of one training step: infinite where the device
  type has no kernel for the op (whatever `estimate` said), and nothing for
  the ops the step does not run (`OpGraph.step_mask`: the
  variable-initialization subgraph).
  """

  name: str = "cost_model"

  def op_costs(self, graph: OpGraph, cluster: Cluster) -> OpCosts:
    """The costs of one training step of `graph` on every device."""
    costs = self.estimate(graph, cluster)
    no_kernel = ~kernel_mask(graph, cluster)
    if no_kernel.any() and np.isfinite(costs.compute_s[no_kernel]).any():
      compute = np.array(costs.compute_s, dtype=np.float64, copy=True)
      compute[no_kernel] = np.inf
      costs = dataclasses.replace(costs, compute_s=compute)
    return step_costs(graph, costs)

  @abc.abstractmethod
  def estimate(self, graph: OpGraph, cluster: Cluster) -> OpCosts:
    """The cost of every op of `graph` on every device of `cluster`."""


def kernel_mask(graph: OpGraph, cluster: Cluster) -> np.ndarray:
  """bool [M, D]: True where the op has a kernel for the device's type.

  An op with an empty `kernels` set is taken to run anywhere.
  """
  types = [d.type for d in cluster.devices]
  mask = np.ones((graph.num_ops, len(types)), dtype=bool)
  for i, op in enumerate(graph.ops):
    if op.kernels:
      mask[i] = [t in op.kernels for t in types]
  return mask


def step_costs(graph: OpGraph, costs: OpCosts) -> OpCosts:
  """`costs` with the ops outside the training step made free.

  Those ops take no compute time and hold no activation or scratch memory;
  an infinite cost (no kernel for the device type) stays infinite, since the
  op must still be placed where it can run.
  """
  outside = ~graph.step_mask
  if not outside.any():
    return costs
  compute = np.array(costs.compute_s, dtype=np.float64, copy=True)
  rows = compute[outside]
  compute[outside] = np.where(np.isfinite(rows), 0.0, rows)
  output_bytes = np.array(costs.output_bytes, copy=True)
  output_bytes[outside] = 0
  scratch = np.array(costs.scratch_bytes, copy=True)
  scratch[outside] = 0
  return OpCosts(compute_s=compute, param_bytes=costs.param_bytes,
                 output_bytes=output_bytes, scratch_bytes=scratch)
