"""GrapplerCostModel: grappler's op-level estimates as tfplace op costs."""

import dataclasses
import os

import numpy as np
import pytest

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.cost import grappler_costs
from tfplace.cost.analytical import AnalyticalCostModel
from tfplace.cost.cluster import Device, make_cluster
from tfplace.cost.grappler_costs import GrapplerCostModel
from tfplace.graph.importers import from_tf_graph, import_graph
from tfplace.graph.op_graph import OpGraph

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
MATMUL_RELU_SUM = os.path.join(ROOT, "testdata", "matmul_relu_sum.pbtxt")
MLP = os.path.join(ROOT, "testdata", "mlp_2tower.pbtxt")
DEV = "/job:localhost/replica:0/task:0/device:{}"


def _device(kind: str, peak: float = 1e11, bandwidth: float = 2e10,
            overhead: float = 5e-6, index: int = 0) -> Device:
  return Device(DEV.format(f"{kind}:{index}"), kind, peak, bandwidth, 8e9,
                overhead)


@pytest.fixture(scope="module")
def small_graph():
  return import_graph(MATMUL_RELU_SUM)


def _matmul_graph(m: int, k: int, n: int) -> OpGraph:
  """x [None, k] (batch resolved to m at import) @ w [k, n]."""
  import tensorflow as tf
  g = tf.Graph()
  with g.as_default():
    x = tf.compat.v1.placeholder(tf.float32, [None, k], name="x")
    w = tf.constant(np.ones((k, n), np.float32), name="w")
    y = tf.matmul(x, w, name="mm")
  return from_tf_graph(g, train_ops=[y.op.name], loss=None, init_ops=[],
                       name=f"mm{m}x{k}x{n}", unknown_dim=m)


def test_matmul_cost_is_flops_at_peak_plus_bytes_at_bandwidth(small_graph):
  # matmul: [2,3] @ [3,4]: 48 FLOPs; 24 + 48 bytes in, 32 out = 104 bytes.
  # Relu on 8 floats: 8 FLOPs, 32 + 32 bytes. Grappler sums the two parts.
  cluster = make_cluster("c", [_device("CPU", overhead=5e-6)])
  costs = GrapplerCostModel().op_costs(small_graph, cluster).compute_s[:, 0]
  matmul = small_graph.index["matmul"]
  relu = small_graph.index["relu"]
  assert costs[matmul] == pytest.approx(5e-6 + 48 / 1e11 + 104 / 2e10,
                                        rel=1e-6)
  assert costs[relu] == pytest.approx(5e-6 + 8 / 1e11 + 64 / 2e10, rel=1e-6)


def test_costs_finite_positive_above_overhead_inf_without_kernel():
  graph = import_graph(MLP)
  ops = [dataclasses.replace(op, kernels=frozenset({"CPU"}))
         if op.type == "ReluGrad" else op for op in graph.ops]
  graph = OpGraph(ops, graph.edges, graph.graph_def, graph.fetches,
                  graph.name)
  cluster = make_cluster("c", [_device("CPU", overhead=1e-5),
                               _device("GPU", 1e13, 9e11, 5e-6)])
  model = GrapplerCostModel()
  costs = model.estimate(graph, cluster).compute_s
  no_gpu = np.array([op.type == "ReluGrad" for op in graph.ops])
  assert no_gpu.sum() == 2
  assert np.all(np.isinf(costs[no_gpu, 1]))
  assert np.all(np.isfinite(costs[~no_gpu, 1]))
  assert np.all(np.isfinite(costs[:, 0]))
  assert np.all(costs[:, 0] >= 1e-5) and np.all(costs[~no_gpu, 1] >= 5e-6)
  # Every op of the graph was reported by grappler (matched by name).
  estimate = model.estimate_on(graph, model.figures(cluster.devices[0]))
  assert estimate.num_matched == graph.num_ops == 59


def test_matmul_time_grows_with_flops_and_uses_resolved_batch():
  cluster = make_cluster("c", [_device("CPU", 1e9, 1e18, overhead=0.0)])
  model = GrapplerCostModel()
  times = {}
  for n in (32, 64):
    graph = _matmul_graph(64, 32, n)
    times[n] = model.op_costs(graph, cluster).compute_s[graph.index["mm"], 0]
  # 2 m k n FLOPs at 1 GFLOP/s (memory time negligible at 1e18 B/s); the
  # placeholder's unknown batch is 64 as the importer resolved it.
  assert times[32] == pytest.approx(2 * 64 * 32 * 32 / 1e9, rel=1e-4)
  assert times[64] == pytest.approx(2 * times[32], rel=1e-4)


def test_ten_times_faster_device_is_ten_times_faster(small_graph):
  slow = _device("CPU", 1e11, 2e10, overhead=0.0, index=0)
  fast = _device("CPU", 1e12, 2e11, overhead=0.0, index=1)
  cluster = make_cluster("c", [slow, fast])
  costs = GrapplerCostModel().op_costs(small_graph, cluster).compute_s
  work = costs[:, 0] > 1e-12
  assert work.sum() >= 3  # matmul, relu, sum
  np.testing.assert_allclose(costs[work, 1], costs[work, 0] / 10, rtol=1e-6)


def test_one_estimate_per_figure_set(small_graph, monkeypatch):
  calls = []
  real = grappler_costs.estimate_op_times

  def counting(graph, peak, bandwidth):
    calls.append((peak, bandwidth))
    return real(graph, peak, bandwidth)

  monkeypatch.setattr(grappler_costs, "estimate_op_times", counting)
  gpus = [_device("GPU", 1e13, 9e11, index=i) for i in range(3)]
  cluster = make_cluster("c", [_device("CPU")] + gpus)
  model = GrapplerCostModel()
  first = model.op_costs(small_graph, cluster).compute_s
  second = model.op_costs(small_graph, cluster).compute_s
  assert sorted(calls) == [(1e11, 2e10), (1e13, 9e11)]  # cached 2nd time
  np.testing.assert_array_equal(first, second)
  np.testing.assert_array_equal(first[:, 1], first[:, 3])


def test_grappler_failure_falls_back_to_analytical(small_graph, monkeypatch):
  def fail(graph, named):
    raise ValueError("cannot schedule")

  monkeypatch.setattr(grappler_costs, "_run_grappler", fail)
  cluster = make_cluster("c", [_device("CPU")])
  got = GrapplerCostModel().op_costs(small_graph, cluster)
  want = AnalyticalCostModel().op_costs(small_graph, cluster)
  np.testing.assert_array_equal(got.compute_s, want.compute_s)
  np.testing.assert_array_equal(got.param_bytes, want.param_bytes)


def test_unreported_ops_fall_back_to_analytical(small_graph, monkeypatch):
  monkeypatch.setattr(grappler_costs, "_run_grappler",
                      lambda graph, named: ({"matmul": 7}, 7.0))
  cluster = make_cluster("c", [_device("CPU", overhead=1e-6)])
  got = GrapplerCostModel().op_costs(small_graph, cluster).compute_s[:, 0]
  want = AnalyticalCostModel().op_costs(small_graph, cluster).compute_s[:, 0]
  i = small_graph.index["matmul"]
  # 7 virtual ns on a device 1e11 / VIRTUAL_FLOPS times slower.
  scale = 1e11 / grappler_costs.VIRTUAL_FLOPS
  assert got[i] == pytest.approx(1e-6 + 7e-9 / scale)
  others = np.arange(small_graph.num_ops) != i
  np.testing.assert_array_equal(got[others], want[others])
