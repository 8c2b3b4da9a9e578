"""The simulator runs one training step: the initialization subgraph is free.

    w (var, dev 0) ──▶ read (dev 0) ──▶ train (dev 0)
    w ──▶ assign (dev 1) ◀── init_value (dev 1, 1000 B)   [init: not in step]

Every op costs 1 s where the step runs it. Without the step mask the two
init ops would add time on device 1 and the 8-byte handle w:0 would cross to
device 1; with it the step is w, read, train on device 0: 3 s, nothing moved.
"""

import numpy as np

from tfplace.cost.cluster import Cluster, Device, LinkSpec
from tfplace.cost.op_costs import CostModel, OpCosts
from tfplace.simulator.simulator import Simulator
from tfplace.graph.op_graph import Edge, Op, OpGraph, StepFetches


class OneSecond(CostModel):

  def estimate(self, graph, cluster):
    return OpCosts(np.ones((graph.num_ops, cluster.num_devices)),
                   graph.param_bytes, graph.output_bytes)


def _graph(fetches):
  ops = [Op("w", "VarHandleOp", ((),), ("resource",), (8,), param_bytes=100),
         Op("read", "ReadVariableOp", ((25,),), ("float32",), (100,)),
         Op("train", "NoOp"),
         Op("init_value", "Const", ((250,),), ("float32",), (1000,)),
         Op("assign", "AssignVariableOp")]
  edges = [Edge(0, 1, 0, 8), Edge(1, 2, -1, 0), Edge(0, 4, 0, 8),
           Edge(3, 4, 0, 1000)]
  return OpGraph(ops, edges, graph_def=None, fetches=fetches)


def _cluster():
  return Cluster("c", tuple(Device(f"/cpu:{i}", "", 1e9, 1e9, 1e6)
                            for i in range(2)),
                 default_link=LinkSpec(latency_s=0.5, bandwidth=100.0))


def _simulate(fetches):
  graph, cluster = _graph(fetches), _cluster()
  sim = Simulator(graph, cluster, OneSecond().op_costs(graph, cluster))
  return sim.simulate(np.array([0, 0, 0, 1, 1]))


def test_initialization_ops_cost_nothing_and_move_nothing():
  result = _simulate(StepFetches(train_ops=("train",), init_ops=("assign",)))
  assert result.step_time_s == 3.0
  assert result.bytes_moved == 0
  assert result.device_busy_s.tolist() == [3.0, 0.0]


def test_without_fetches_every_op_is_simulated():
  result = _simulate(StepFetches())
  # w (1 s), then w:0 crosses to device 1 (0.5 + 8/100 s) while init_value
  # runs there (0..1 s); assign starts at max(1, 1.58) = 1.58 and ends 2.58;
  # device 0 runs w, read, train: 3 s.
  assert result.bytes_moved == 8
  assert result.device_busy_s.tolist() == [3.0, 2.0]
  assert result.step_time_s == 3.0
