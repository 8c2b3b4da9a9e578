"""Tests for the human-expert placer's scope rules."""

import tfplace  # noqa: F401  (before TensorFlow)

import numpy as np

from tfplace.cost.cluster import Cluster, Device
from tfplace.cost.op_costs import OpCosts
from tfplace.graph.op_graph import Edge, Op, OpGraph
from tfplace.placers.expert import ExpertPlacer, scope_slot
from tfplace.placers.problem import PlacementProblem

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"


def gpu(k):
  return f"/job:localhost/replica:0/task:0/device:GPU:{k}"


def make_cluster(num_gpus, flops=None):
  flops = flops or [1e12] * num_gpus
  return Cluster("c", (Device(CPU, "CPU", 1e11, 1e10, 1e10),) + tuple(
      Device(gpu(k), "GPU", flops[k], 1e11, 1e10) for k in range(num_gpus)))


def make_costs(graph, cluster):
  compute = np.array([[op.flops / d.peak_flops if d.type in op.kernels
                       else np.inf for d in cluster.devices]
                      for op in graph.ops])
  return OpCosts(compute, graph.param_bytes, graph.output_bytes)


def problem(graph, cluster):
  return PlacementProblem(graph, cluster, make_costs(graph, cluster))


def chain(names, cpu_only=(), groups=None):
  ops = [Op(n, "MatMul", flops=1e6,
            kernels=frozenset({"CPU"}) if n in cpu_only
            else frozenset({"CPU", "GPU"})) for n in names]
  edges = [Edge(i, i + 1, 0, 4) for i in range(len(ops) - 1)]
  return OpGraph(ops, edges, None, colocation_groups=groups)


RNNLM = ["embedding/lookup", "lstm_0/t_0/MatMul", "lstm_1/t_0/MatMul",
         "lstm_2/t_0/MatMul", "softmax/MatMul", "loss",
         "gradients/softmax/MatMul_grad", "gradients/lstm_1/t_0/MatMul_grad",
         "lstm_1/kernel", "training/update_lstm_1/kernel/ApplyAdam",
         "lstm_1/t_0/py_hook"]


def test_scope_slot():
  assert scope_slot("lstm_3/t_0/x", 2) == 1
  assert scope_slot("gradients/lstm_0/t_1/MatMul_grad", 2) == 0
  assert scope_slot("encoder/layer_0/fw/t_0/x", 4) == 0
  assert scope_slot("decoder/layer_3/t_2/x", 4) == 3
  assert scope_slot("decoder/embedding/lookup", 4) == 0
  assert scope_slot("attention/t_0/scores", 4) == 3
  assert scope_slot("gradients/softmax/MatMul_grad", 4) == 3
  assert scope_slot("loss", 4) is None
  assert scope_slot("update_lstm_1/kernel", 4) is None  # Not a scope.


def test_rnnlm_layers_spread_over_gpus():
  # kernel and its optimizer update are one colocation group; py_hook has
  # no GPU kernel.
  groups = np.arange(len(RNNLM))
  groups[9] = 8
  graph = chain(RNNLM, cpu_only={"lstm_1/t_0/py_hook"}, groups=groups)
  cluster = make_cluster(2)
  p = ExpertPlacer().place(problem(graph, cluster))
  p.validate(graph, cluster)
  assert [p.devices[n] for n in RNNLM] == [
      gpu(0), gpu(0), gpu(1), gpu(0), gpu(1), gpu(0), gpu(1), gpu(1),
      gpu(1), gpu(1), CPU]
  assert p.metadata.placer == "expert"


def test_nmt_on_four_gpus():
  names = ["encoder/embedding/lookup", "encoder/layer_0/fw/t_0/x",
           "encoder/layer_0/bw/t_0/x", "encoder/layer_1/t_0/x",
           "decoder/embedding/lookup", "decoder/layer_0/t_0/x",
           "decoder/layer_3/t_0/x", "attention/t_0/scores", "softmax/logits"]
  graph, cluster = chain(names), make_cluster(4)
  p = ExpertPlacer().place(problem(graph, cluster))
  assert [p.devices[n] for n in names] == [
      gpu(0), gpu(0), gpu(0), gpu(1), gpu(0), gpu(0), gpu(3), gpu(3), gpu(3)]


def test_group_goes_where_most_members_point():
  names = ["lstm_0/a", "lstm_1/b", "lstm_1/c"]
  graph = chain(names, groups=np.array([0, 0, 0]))
  cluster = make_cluster(2)
  p = ExpertPlacer().place(problem(graph, cluster))
  assert set(p.devices.values()) == {gpu(1)}


def test_unknown_model_on_fastest_gpu():
  names = ["conv1/Conv2D", "mixed_5b/branch/Conv2D", "logits/MatMul"]
  graph = chain(names)
  cluster = make_cluster(2, flops=[1e12, 3e12])
  p = ExpertPlacer().place(problem(graph, cluster))
  assert set(p.devices.values()) == {gpu(1)}


def test_no_gpu_means_cpu():
  graph, cluster = chain(RNNLM[:3]), make_cluster(0)
  p = ExpertPlacer().place(problem(graph, cluster))
  assert set(p.devices.values()) == {CPU}
