"""Tests of m-TOPO on hand-made chains: balanced fill and memory spill."""

import tfplace  # noqa: F401  (before TensorFlow)

import numpy as np

from tfplace.cost.cluster import Device, LinkSpec, make_cluster
from tfplace.cost.op_costs import OpCosts
from tfplace.graph.op_graph import Edge, Op, OpGraph
from tfplace.placers import baechi_common
from tfplace.placers.m_topo import MTopoPlacer
from tfplace.placers.registry import get_placer
from tfplace.placers.problem import PlacementProblem


def _chain(length, nbytes=1000):
  ops = [Op(f"op{k}", "X", output_bytes=(nbytes,)) for k in range(length)]
  edges = [Edge(k, k + 1, 0, nbytes) for k in range(length - 1)]
  return ops, edges


def _cluster(memories):
  devices = [Device(f"/device:GPU:{i}", "GPU", 1e12, 1e11, m)
             for i, m in enumerate(memories)]
  return make_cluster("test", devices, default_link=LinkSpec(1e-3, 1e6))


def _place(graph, cluster, seconds, **config):
  t = np.asarray(seconds, dtype=np.float64)
  costs = OpCosts(np.tile(t[:, None], (1, cluster.num_devices)),
                  graph.param_bytes, graph.output_bytes)
  placer = MTopoPlacer(baechi_common.BaechiOptions(**config))
  placement = placer.place(PlacementProblem(graph, cluster, costs))
  placement.validate(graph, cluster)
  return placement.to_array(graph, cluster).tolist()


def test_chain_split_in_balanced_halves():
  ops, edges = _chain(10)
  graph = OpGraph(ops, edges, None)
  assert _place(graph, _cluster([1e9, 1e9]), [1.0] * 10) == [0] * 5 + [1] * 5


def test_balance_follows_compute_not_op_count():
  # Total 8 s, share 4 s: ops 0 (3 s) and 1 (1 s) fill GPU:0.
  ops, edges = _chain(6)
  graph = OpGraph(ops, edges, None)
  assert _place(graph, _cluster([1e9, 1e9]),
                [3.0, 1.0, 1.0, 1.0, 1.0, 1.0]) == [0, 0, 1, 1, 1, 1]


def test_memory_forces_an_earlier_split():
  # Each op needs 1000 B + 500 B params; GPU:0 holds 3 ops (4500 B) only.
  ops = [Op(f"op{k}", "X", output_bytes=(1000,), param_bytes=500)
         for k in range(10)]
  edges = [Edge(k, k + 1, 0, 1000) for k in range(9)]
  graph = OpGraph(ops, edges, None)
  assert _place(graph, _cluster([4500, 1e9]), [1.0] * 10) == [0] * 3 + [1] * 7


def test_activation_fraction_scales_the_estimate():
  # Half the output bytes: 500 + 500 = 1000 B per op, 4 ops fit in 4500 B.
  ops = [Op(f"op{k}", "X", output_bytes=(1000,), param_bytes=500)
         for k in range(10)]
  edges = [Edge(k, k + 1, 0, 1000) for k in range(9)]
  graph = OpGraph(ops, edges, None)
  assert _place(graph, _cluster([4500, 1e9]), [1.0] * 10,
                activation_fraction=0.5) == [0] * 4 + [1] * 6


def test_colocation_group_follows_its_first_op():
  ops, edges = _chain(10)
  groups = np.arange(10)
  groups[9] = 0  # The last op is colocated with the first.
  graph = OpGraph(ops, edges, None, colocation_groups=groups)
  # The group {0, 9} (2000 B) is charged on GPU:0 when op 0 is placed.
  assert _place(graph, _cluster([1e9, 1e9]), [1.0] * 10) == (
      [0] * 5 + [1] * 4 + [0])


def test_registered_by_name():
  assert isinstance(get_placer("m_topo"), MTopoPlacer)
