"""Tests for the Scotch and METIS min-cut placers."""

import tfplace  # noqa: F401  (before TensorFlow)

import itertools

import numpy as np
import pytest

from tfplace.cost.cluster import Cluster, Device
from tfplace.cost.op_costs import OpCosts
from tfplace.graph.op_graph import Edge, Op, OpGraph
from tfplace.placers.registry import get_placer
from tfplace.placers.problem import PlacementProblem

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
GPU1 = "/job:localhost/replica:0/task:0/device:GPU:1"
MB = 1 << 20


def make_cluster():
  return Cluster("cpu+2gpu", (Device(CPU, "CPU", 1e11, 1e10, 1e10),
                              Device(GPU0, "GPU", 1e12, 1e11, 1e10),
                              Device(GPU1, "GPU", 1e12, 1e11, 1e10)))


def make_costs(graph, cluster):
  compute = np.array([[op.flops / d.peak_flops if d.type in op.kernels
                       else np.inf for d in cluster.devices]
                      for op in graph.ops])
  return OpCosts(compute, graph.param_bytes, graph.output_bytes)


def problem(graph, cluster):
  return PlacementProblem(graph, cluster, make_costs(graph, cluster))


def two_blobs(blob=5, cpu_only=False):
  """Two dense DAGs of `blob` ops (1 MB edges) joined by one 4-byte edge.

  Ops a0..a{blob-1}, b0..b{blob-1}; a{blob-1} -> b0 is the light edge.
  In blob A, a0 and a1 form one colocation group. Optionally an extra
  CPU-only op `io` feeds a0.
  """
  ops = [Op(f"{p}{i}", "MatMul", flops=1e9, output_bytes=(MB,))
         for p in "ab" for i in range(blob)]
  edges = []
  for base in (0, blob):
    for i, j in itertools.combinations(range(blob), 2):
      edges.append(Edge(base + i, base + j, 0, MB))
  edges.append(Edge(blob - 1, blob, 0, 4))
  groups = list(range(2 * blob))
  groups[1] = 0
  if cpu_only:
    ops.append(Op("io", "PyFunc", flops=1e6, output_bytes=(MB,),
                  kernels=frozenset({"CPU"})))
    edges.append(Edge(len(ops) - 1, 0, 0, MB))
    groups.append(len(ops) - 1)
  return OpGraph(ops, edges, None, name="blobs",
                 colocation_groups=np.array(groups))


@pytest.mark.parametrize("name", ["metis", "scotch"])
def test_cuts_the_light_edge(name):
  graph, cluster = two_blobs(), make_cluster()
  p = get_placer(name).place(problem(graph, cluster), seed=0)
  p.validate(graph, cluster)
  a = {p.devices[f"a{i}"] for i in range(5)}
  b = {p.devices[f"b{i}"] for i in range(5)}
  assert len(a) == 1 and len(b) == 1
  assert a | b == {GPU0, GPU1}
  assert p.metadata.placer == name


@pytest.mark.parametrize("name", ["metis", "scotch"])
def test_cpu_only_ops_forced_to_cpu(name):
  graph, cluster = two_blobs(cpu_only=True), make_cluster()
  p = get_placer(name).place(problem(graph, cluster), seed=0)
  p.validate(graph, cluster)
  assert p.devices["io"] == CPU
  assert {d for n, d in p.devices.items() if n != "io"} == {GPU0, GPU1}


@pytest.mark.parametrize("name", ["metis", "scotch"])
def test_deterministic_for_a_seed(name):
  graph, cluster = two_blobs(blob=6), make_cluster()
  costs = make_costs(graph, cluster)
  p1 = get_placer(name).place(PlacementProblem(graph, cluster, costs), seed=2)
  p2 = get_placer(name).place(PlacementProblem(graph, cluster, costs), seed=2)
  assert p1.devices == p2.devices


@pytest.mark.parametrize("name", ["metis", "scotch"])
def test_single_gpu_and_tiny_graphs(name):
  one_gpu = Cluster("cpu+gpu", make_cluster().devices[:2])
  graph = two_blobs()
  p = get_placer(name).place(problem(graph, one_gpu))
  assert set(p.devices.values()) == {GPU0}
  tiny = OpGraph([Op("x", "Add", flops=1.0)], [], None)
  p = get_placer(name).place(problem(tiny, make_cluster()))
  assert p.devices == {"x": GPU0}


def test_scotch_is_deterministic_across_calls():
  import numpy as np
  from tfplace.placers.min_cut import ScotchPlacer
  rng = np.random.RandomState(0)
  # A ring of 200 vertices with random chords and weights.
  n = 200
  pairs = {(i, (i + 1) % n) for i in range(n)}
  pairs |= {tuple(sorted(p)) for p in rng.randint(0, n, (300, 2)) if p[0] != p[1]}
  adj = [[] for _ in range(n)]
  for a, b in pairs:
    adj[a].append(b)
    adj[b].append(a)
  ptr = np.cumsum([0] + [len(a) for a in adj])
  nbr = np.array([x for a in adj for x in a])
  vweight = rng.randint(1, 100, n)
  eweight = np.ones(len(nbr), dtype=np.int64)
  placer = ScotchPlacer()
  runs = [placer._partition(ptr, nbr, vweight, eweight, 4, seed=0).tolist()
          for _ in range(5)]
  assert all(run == runs[0] for run in runs)
  assert sorted(set(runs[0])) == [0, 1, 2, 3]
