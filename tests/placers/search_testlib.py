"""Small graphs whose best placement is known by hand, for the search tests."""

import numpy as np

from tfplace.cost.op_costs import OpCosts
from tfplace.cost.presets import cpu_cluster
from tfplace.graph.op_graph import Edge, Op, OpGraph
from tfplace.grouping.group_graph import build_group_graph
from tfplace.placers.problem import PlacementProblem
from tfplace.placers.search_support import SearchSpace
from tfplace.simulator.simulator import Simulator


def independent_ops(num_ops=4, seconds=1.0, param_bytes=0):
  """`num_ops` unconnected ops of `seconds` each on any device: on 2
  devices the best step time is num_ops / 2 * seconds."""
  ops = [Op(f"op{i}", "MatMul", output_bytes=(8,), param_bytes=param_bytes)
         for i in range(num_ops)]
  graph = OpGraph(ops, [], graph_def=None, name="independent")
  costs = OpCosts(np.full((num_ops, 2), seconds),
                  np.full(num_ops, param_bytes, np.int64),
                  np.full(num_ops, 8, np.int64))
  return graph, costs


def chain(num_ops=4, seconds=1.0, nbytes=10**9):
  """A chain whose 1 GB tensors take 1 s to cross a 1 GB/s link: on one
  device the step takes num_ops * seconds, any split costs more."""
  ops = [Op(f"op{i}", "MatMul", output_bytes=(nbytes,)) for i in range(num_ops)]
  edges = [Edge(i, i + 1, 0, nbytes) for i in range(num_ops - 1)]
  graph = OpGraph(ops, edges, graph_def=None, name="chain")
  costs = OpCosts(np.full((num_ops, 2), seconds), np.zeros(num_ops, np.int64),
                  np.zeros(num_ops, np.int64))
  return graph, costs


def space(graph, costs, memory_bytes=1e12, latency_s=0.0, bandwidth=1e10):
  """(SearchSpace over the colocation groups, simulator, cluster)."""
  cluster = cpu_cluster(2, memory_bytes=memory_bytes, latency_s=latency_s,
                        bandwidth=bandwidth, launch_overhead_s=0.0)
  sim = Simulator(graph, cluster, costs)
  groups = build_group_graph(graph, costs)

  def evaluate(candidates):
    return sim.simulate_batch(np.asarray(candidates)[:, groups.group_of])

  capacity = np.array([d.memory_bytes for d in cluster.devices], float)
  return SearchSpace(groups, evaluate, capacity), sim, cluster


def chain_problem(num_ops=10, num_devices=3, memory_bytes=8e9):
  """The learned placers' chain: ops of 1 s each, 100 B of parameters, 1 kB
  edges over a slow (1 MB/s) link, as a `PlacementProblem`."""
  ops = [Op(f"op{i}", "MatMul", output_bytes=(1000,), param_bytes=100)
         for i in range(num_ops)]
  edges = [Edge(i, i + 1, 0, 1000) for i in range(num_ops - 1)]
  graph = OpGraph(ops, edges, graph_def=None, name="chain")
  costs = OpCosts(np.ones((num_ops, num_devices)), graph.param_bytes,
                  graph.output_bytes)
  cluster = cpu_cluster(num_devices, memory_bytes=memory_bytes, bandwidth=1e6)
  return PlacementProblem(graph, cluster, costs)
