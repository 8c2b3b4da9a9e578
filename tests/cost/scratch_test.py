"""Kernels' scratch memory: the CPU convolution gradients' patch buffers."""

import dataclasses
import json

import numpy as np
import pytest

import tfplace  # noqa: F401
from tfplace.cost.analytical import AnalyticalCostModel
from tfplace.cost.cluster import Cluster, Device
from tfplace.errors import ClusterError
from tfplace.cost.op_costs import OpCosts
from tfplace.cost.presets import cpu_cluster, k80x2
from tfplace.cost.scratch import (cpu_filter_gradient_scratch,
                                  cpu_input_gradient_scratch,
                                  op_scratch_bytes, scratch_bytes)
from tfplace.graph.conv_geometry import ConvGeometry, conv_geometry
from tfplace.models.registry import build_model
from tfplace.placement import Placement
from tfplace.simulator.simulator import Simulator

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU = "/job:localhost/replica:0/task:0/device:GPU:0"


def _geometry(batch, size, cin, cout, kernel, stride, padding):
  out = -(-size // stride) if padding == "SAME" else (
      (size - kernel) // stride + 1)
  return ConvGeometry(batch=batch, out_pixels=out * out,
                      window=kernel * kernel * cin, out_channels=cout,
                      dtype_bytes=4)


# Bytes TF 2.21's CPU kernels allocated beyond their outputs, traced with
# the BFC allocator (batch, size, cin, cout, kernel, stride, padding).
FILTER_MEASURED = [
    ((8, 32, 3, 64, 5, 2, "VALID"), 14465024),
    ((2, 56, 8, 16, 1, 2, "SAME"), 10436608),
    ((1, 16, 128, 128, 5, 1, "SAME"), 22937600),
    ((32, 8, 3, 8, 1, 1, "SAME"), 8296704),
]


@pytest.mark.parametrize("shape,measured", FILTER_MEASURED)
def test_filter_gradient_fills_the_working_set_whatever_the_batch(shape,
                                                                  measured):
  assert cpu_filter_gradient_scratch(_geometry(*shape)) == measured


def test_input_gradient_takes_one_image_with_enough_work_per_thread():
  # 8 images of 32x32x8, 3x3 VALID: 72,576 matrix elements per image, over
  # 256 KiB with one thread (one image at a time), under it with two.
  conv = _geometry(8, 32, 8, 8, 3, 1, "VALID")
  assert cpu_input_gradient_scratch(conv, threads=1) == 259328
  assert cpu_input_gradient_scratch(conv, threads=2) == 28252928
  # One image: always one at a time.
  assert cpu_input_gradient_scratch(
      _geometry(1, 56, 16, 8, 5, 1, "SAME"), threads=2) == 5017600


def test_no_scratch_modelled_on_a_gpu_or_for_other_ops():
  conv = _geometry(8, 32, 3, 64, 5, 2, "VALID")
  gpu = Device(GPU, "GPU", peak_flops=1e12, memory_bandwidth=1e11,
               memory_bytes=1e9)
  cpu = Device(CPU, "CPU", peak_flops=1e11, memory_bandwidth=1e10,
               memory_bytes=1e9, slots=2)
  assert op_scratch_bytes("Conv2DBackpropFilter", conv, gpu) == 0
  assert op_scratch_bytes("Conv2DBackpropFilter", None, cpu) == 0
  assert op_scratch_bytes("Conv2D", conv, cpu) == 0
  assert op_scratch_bytes("Conv2DBackpropInput", conv, cpu) == (
      cpu_input_gradient_scratch(conv, threads=2))


def test_no_scratch_where_the_cpu_gradients_take_no_buffers():
  # A CPU whose convolution gradients a benchmark found to take no patch
  # buffers from TF's allocator (oneDNN's kernels) gets none; the JSON
  # form keeps that, and leaves the default out.
  conv = _geometry(8, 32, 3, 64, 5, 2, "VALID")
  onednn = Device(CPU, "CPU", peak_flops=1e11, memory_bandwidth=1e10,
                  memory_bytes=1e9, conv_grad_buffers=False)
  assert op_scratch_bytes("Conv2DBackpropFilter", conv, onednn) == 0
  assert op_scratch_bytes("Conv2DBackpropInput", conv, onednn) == 0
  own = dataclasses.replace(onednn, conv_grad_buffers=True)
  assert op_scratch_bytes("Conv2DBackpropFilter", conv, own) > 0
  cluster = Cluster("c", (onednn, dataclasses.replace(
      own, name=CPU.replace("task:0", "task:1"))))
  data = cluster.to_dict()
  assert data["devices"][0]["conv_grad_buffers"] is False
  assert "conv_grad_buffers" not in data["devices"][1]
  assert Cluster.from_dict(json.loads(json.dumps(data))) == cluster
  with pytest.raises(ClusterError, match="conv_grad_buffers"):
    dataclasses.replace(onednn, conv_grad_buffers="no")


def test_geometry_is_read_for_nhwc_undilated_gradients_only():
  ins = [(4, 16, 16, 3), (4,), (4, 8, 8, 8)]
  outs = [(3, 3, 3, 8)]
  attrs = {"data_format": b"NHWC", "dilations": [1, 1, 1, 1]}
  got = conv_geometry("Conv2DBackpropFilter", ins, outs, 4, attrs.get)
  assert got == ConvGeometry(batch=4, out_pixels=64, window=27,
                             out_channels=8, dtype_bytes=4)
  nchw = dict(attrs, data_format=b"NCHW")
  assert conv_geometry("Conv2DBackpropFilter", ins, outs, 4, nchw.get) is None
  dilated = dict(attrs, dilations=[1, 2, 2, 1])
  assert conv_geometry("Conv2DBackpropFilter", ins, outs, 4,
                       dilated.get) is None
  assert conv_geometry("Conv2D", ins, outs, 4, attrs.get) is None
  grad_input = conv_geometry("Conv2DBackpropInput",
                             [(4,), (3, 3, 3, 8), (4, 8, 8, 8)],
                             [(4, 16, 16, 3)], 4, attrs.get)
  assert grad_input == got


def test_imported_graph_costs_scratch_on_cpus_and_the_simulator_holds_it():
  graph = build_model("small_cnn")
  grads = [i for i, op in enumerate(graph.ops)
           if op.type in ("Conv2DBackpropFilter", "Conv2DBackpropInput")]
  assert grads and all(graph.ops[i].conv is not None for i in grads)
  cluster = cpu_cluster(1)
  costs = AnalyticalCostModel().op_costs(graph, cluster)
  assert (costs.scratch_bytes[grads, 0] > 1 << 20).all()
  others = np.setdiff1d(np.arange(graph.num_ops), grads)
  assert (costs.scratch_bytes[others] == 0).all()
  assert (scratch_bytes(graph, k80x2())[:, 1:] == 0).all()  # GPUs: none.
  alone = np.zeros(graph.num_ops, np.int32)
  with_scratch = Simulator(graph, cluster, costs).simulate(alone)
  without = Simulator(graph, cluster, OpCosts(
      costs.compute_s, costs.param_bytes, costs.output_bytes)).simulate(alone)
  assert with_scratch.step_time_s == without.step_time_s
  # One gradient runs at a time on one slot: the peak rises by at most the
  # largest buffer, and by at least the largest less the tensors' peak.
  extra = with_scratch.peak_memory_bytes[0] - without.peak_memory_bytes[0]
  largest = costs.scratch_bytes[:, 0].max()
  assert largest - without.peak_memory_bytes[0] <= extra <= largest


def test_scratch_matches_what_tf_allocates_on_a_worker(tmp_path,
                                                      monkeypatch):
  from tensorflow.core.framework import step_stats_pb2
  # The model is of TF's own CPU kernels. On a CPU with AVX512_VNNI (or
  # newer) TF runs oneDNN's convolutions by default, whose buffers the
  # allocator's peaks do not show: the worker (a child process) runs TF's.
  monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "0")
  from tfplace.measurement.config import MeasureConfig
  from tfplace.measurement.local_cluster import LocalCluster
  from tfplace.measurement.runner import STEP_STATS_FILE, measure
  graph = build_model("small_cnn")
  with LocalCluster(num_workers=1, cores_per_worker=1) as lc:
    cluster = lc.to_cluster()
    placement = Placement({op.name: cluster.device_names[0]
                           for op in graph.ops})
    measure(graph, placement, MeasureConfig(target=lc.target, warmup=1,
                                            steps=1, timeout_s=120),
            cluster=cluster, trace_dir=str(tmp_path))
  with open(tmp_path / STEP_STATS_FILE, "rb") as f:
    stats = step_stats_pb2.StepStats.FromString(f.read())
  costs = AnalyticalCostModel().op_costs(graph, cluster)
  checked = 0
  for node in (n for d in stats.dev_stats for n in d.node_stats):
    i = graph.index.get(node.node_name)
    if i is None or graph.ops[i].conv is None:
      continue
    outputs = sum(o.tensor_description.allocation_description.allocated_bytes
                  for o in node.output)
    measured = sum(m.peak_bytes for m in node.memory) - outputs
    predicted = int(costs.scratch_bytes[i, 0])
    # BFC hands out a whole free chunk up to twice the request.
    assert predicted <= measured <= 2 * predicted, node.node_name
    checked += 1
  assert checked == sum(op.conv is not None for op in graph.ops) > 0
