"""Tests for step costs: ops a training step does not run cost nothing."""

import numpy as np

from tfplace.cost.cluster import Cluster, Device
from tfplace.cost.op_costs import CostModel, OpCosts
from tfplace.graph.op_graph import Edge, Op, OpGraph, StepFetches


class OneSecondEach(CostModel):
  """1 s per op on device 0; no kernel (inf) for op 3 on device 1."""

  def estimate(self, graph, cluster):
    compute = np.ones((graph.num_ops, cluster.num_devices))
    compute[3, 1] = np.inf
    return OpCosts(compute, graph.param_bytes, np.full(graph.num_ops, 100))


def _graph():
  # train <- b <- a ; init <- init_value (the initialization subgraph).
  ops = [Op("a", "Neg"), Op("b", "Neg"), Op("train", "NoOp"),
         Op("init_value", "Const"), Op("init", "NoOp")]
  edges = [Edge(0, 1, 0, 4), Edge(1, 2, -1, 0), Edge(3, 4, -1, 0)]
  return OpGraph(ops, edges, graph_def=None,
                 fetches=StepFetches(train_ops=("train",), init_ops=("init",)))


def _cluster():
  return Cluster("c", tuple(Device(f"/cpu:{i}", "", 1e9, 1e9, 1e9)
                            for i in range(2)))


def test_ops_outside_the_step_are_free_but_keep_missing_kernels():
  model = OneSecondEach()
  costs = model.op_costs(_graph(), _cluster())
  assert costs.compute_s[:3].tolist() == [[1, 1]] * 3
  assert costs.compute_s[3].tolist() == [0, np.inf]   # init_value
  assert costs.compute_s[4].tolist() == [0, 0]        # init
  assert costs.output_bytes.tolist() == [100, 100, 100, 0, 0]
  # estimate() is the per-op figure, whether or not the step runs the op.
  assert model.estimate(_graph(), _cluster()).compute_s[4].tolist() == [1, 1]
