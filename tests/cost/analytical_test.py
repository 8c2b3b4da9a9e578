"""Analytical (roofline) op costs, worked by hand."""

import dataclasses

import numpy as np
import pytest

import tfplace  # noqa: F401
from tfplace.cost.analytical import AnalyticalConfig, AnalyticalCostModel
from tfplace.cost.cluster import Device, make_cluster
from tfplace.graph.op_graph import Edge, Op, OpGraph

UNIT = AnalyticalConfig(compute_efficiency={"CPU": 1.0, "GPU": 0.5},
                        memory_efficiency=1.0)


def cluster(slots=1):
  cpu = Device("/device:CPU:0", "CPU", peak_flops=1e9, memory_bandwidth=1e9,
               memory_bytes=1e12, launch_overhead_s=1e-3, slots=slots)
  gpu = Device("/device:GPU:0", "GPU", peak_flops=4e9, memory_bandwidth=1e10,
               memory_bytes=1e12, launch_overhead_s=1e-4)
  return make_cluster("c", [cpu, gpu])


def graph():
  ops = [
      Op("compute", "MatMul", output_bytes=(0,), flops=2e9),
      Op("memory", "Relu", output_bytes=(int(1e9),), flops=1.0),
      Op("const", "Const", output_bytes=(int(1e9),)),
      Op("gpu_only", "NcclAllReduce", output_bytes=(0,), flops=1e9,
         kernels=frozenset({"GPU"})),
  ]
  edges = [Edge(2, 1, 0, int(2e9))]  # 2e9 bytes in + 1e9 out for "memory".
  return OpGraph(ops, edges, graph_def=None)


def test_roofline_times():
  s = AnalyticalCostModel(UNIT).op_costs(graph(), cluster()).compute_s
  # compute-bound: 2e9 / 1e9 on CPU; 2e9 / (4e9 * 0.5) on GPU.
  assert s[0] == pytest.approx([2.0 + 1e-3, 1.0 + 1e-4])
  # memory-bound: 3e9 bytes / 1e9 B/s on CPU, / 1e10 on GPU.
  assert s[1] == pytest.approx([3.0 + 1e-3, 0.3 + 1e-4])
  # trivial: only the launch overhead.
  assert s[2] == pytest.approx([1e-3, 1e-4])
  # no CPU kernel.
  assert s[3, 0] == np.inf and s[3, 1] == pytest.approx(0.5 + 1e-4)


def test_an_einsums_transposes_add_their_memory_traffic():
  # The same product, once with 2e9 bytes of operand and result copies.
  ops = [Op("plain", "Einsum", output_bytes=(0,), flops=2e9),
         Op("copied", "Einsum", output_bytes=(0,), flops=2e9,
            copy_bytes=int(2e9))]
  model = AnalyticalCostModel(UNIT)
  s = model.op_costs(OpGraph(ops, [], graph_def=None), cluster()).compute_s
  # The copies run beside the product's roofline, not under it: 2e9 /
  # 1e9 B/s more on the CPU, 2e9 / 1e10 on the GPU.
  assert s[0] == pytest.approx([2.0 + 1e-3, 1.0 + 1e-4])
  assert s[1] == pytest.approx([4.0 + 1e-3, 1.2 + 1e-4])
  work = model.work_seconds(OpGraph(ops, [], graph_def=None), cluster())
  assert work[1] - work[0] == pytest.approx([2.0, 0.2])


def test_a_variable_read_in_copy_on_read_mode_costs_its_copy():
  # A ReadVariableOp is trivial (launch only) unless it copies the
  # variable: then its 2e9 bytes of copy traffic at the memory rate.
  ops = [Op("read", "ReadVariableOp", output_bytes=(int(1e9),)),
         Op("copying_read", "ReadVariableOp", output_bytes=(int(1e9),),
            variant="copy_on_read", copy_bytes=int(2e9))]
  model = AnalyticalCostModel(UNIT)
  s = model.op_costs(OpGraph(ops, [], graph_def=None), cluster()).compute_s
  assert s[0] == pytest.approx([1e-3, 1e-4])
  assert s[1] == pytest.approx([2.0 + 1e-3, 0.2 + 1e-4])
  work = model.work_seconds(OpGraph(ops, [], graph_def=None), cluster())
  assert work[:, 0] == pytest.approx([0.0, 2.0])


def test_slots_share_the_device_peak():
  s = AnalyticalCostModel(UNIT).op_costs(graph(), cluster(slots=2)).compute_s
  assert s[0, 0] == pytest.approx(4.0 + 1e-3)


def test_op_type_scale_and_bytes_passed_through():
  cfg = AnalyticalConfig(compute_efficiency={"CPU": 1.0}, memory_efficiency=1.0,
                         op_type_scale={"MatMul": 3.0})
  costs = AnalyticalCostModel(cfg).op_costs(graph(), cluster())
  assert costs.compute_s[0, 0] == pytest.approx(6.0 + 1e-3)
  # The constant's 1e9 bytes are resident (TF's kernel holds its tensor),
  # not an output that lives until its reader ends.
  np.testing.assert_array_equal(costs.output_bytes, [0, 1e9, 0, 0])
  np.testing.assert_array_equal(costs.param_bytes, [0, 0, 1e9, 0])


def test_measured_rates_replace_the_efficiency_scaled_figures():
  from tfplace.cost.cluster import Cluster
  ops = [Op("mm", "MatMul", output_bytes=(0,), flops=1e9),
         Op("cv", "Conv2DBackpropInput", output_bytes=(0,), flops=1e9),
         Op("add", "AddV2", output_bytes=(4_000_000,), flops=1e6)]
  graph = OpGraph(ops, [], graph_def=None)
  plain = Device("/cpu:0", "CPU", 1e10, 1e9, 1e12, launch_overhead_s=0.0)
  measured = Device("/cpu:1", "CPU", 1e10, 1e9, 1e12, launch_overhead_s=0.0,
                    matmul_flops=2e9, conv_flops=1e9, copy_bandwidth=8e9)
  cluster = Cluster("c", (plain, measured))
  work = AnalyticalCostModel().work_seconds(graph, cluster)
  # Datasheet: 1e10 x 0.4 FLOP/s, 1e9 x 0.7 B/s; measured: as they are.
  assert work[0] == pytest.approx([1e9 / 4e9, 1e9 / 2e9])
  assert work[1] == pytest.approx([1e9 / 4e9, 1e9 / 1e9])
  assert work[2] == pytest.approx([4e6 / 7e8, 4e6 / 8e9])
  costs = AnalyticalCostModel().op_costs(graph, cluster).compute_s
  np.testing.assert_allclose(costs, work)  # no launch overhead here


def test_narrow_convolutions_leave_vector_lanes_idle():
  from tfplace.cost.cluster import Cluster
  # Output channels last (NHWC): 4, 16 and 64; a filter gradient [3,3,8,4].
  ops = [Op("narrow", "Conv2D", output_shapes=((8, 16, 16, 4),),
            output_bytes=(0,), flops=1e9),
         Op("full", "Conv2DBackpropInput", output_shapes=((8, 16, 16, 16),),
            output_bytes=(0,), flops=1e9),
         Op("wide", "Conv2D", output_shapes=((8, 16, 16, 64),),
            output_bytes=(0,), flops=1e9),
         Op("filter", "Conv2DBackpropFilter", output_shapes=((3, 3, 8, 4),),
            output_bytes=(0,), flops=1e9),
         Op("depthwise", "DepthwiseConv2dNative",
            output_shapes=((8, 16, 16, 4),), output_bytes=(0,), flops=1e9),
         Op("mm", "MatMul", output_shapes=((8, 4),), output_bytes=(0,),
            flops=1e9)]
  graph = OpGraph(ops, [], graph_def=None)
  unmeasured = Device("/cpu:0", "CPU", 1e10, 1e9, 1e12, launch_overhead_s=0.0,
                      matmul_flops=2e9, conv_flops=1e9)
  lanes = Device("/cpu:1", "CPU", 1e10, 1e9, 1e12, launch_overhead_s=0.0,
                 matmul_flops=2e9, conv_flops=1e9, conv_lanes=16.0)
  work = AnalyticalCostModel().work_seconds(graph, Cluster("c", (unmeasured,
                                                                 lanes)))
  # 4 of 16 lanes busy: 4x the time; 16 or more channels: the full rate.
  np.testing.assert_allclose(work[:, 1], [4.0, 1.0, 1.0, 4.0, 1.0, 0.5])
  np.testing.assert_allclose(work[:, 0], [1.0, 1.0, 1.0, 1.0, 1.0, 0.5])
  costs = AnalyticalCostModel().op_costs(graph, Cluster("c", (lanes,)))
  np.testing.assert_allclose(costs.compute_s[:, 0], work[:, 1])
  # Without any measured lanes the costs are the old ones, bit for bit.
  alone = AnalyticalCostModel().work_seconds(graph, Cluster("c", (unmeasured,)))
  assert np.array_equal(alone[:, 0], work[:, 0])


def test_random_generators_cost_their_values_at_the_measured_rate():
  from tfplace.cost.cluster import Cluster
  # 1M values each; the output bytes alone would take 4 ms at 1 GB/s.
  ops = [Op("dropout_mask", "RandomUniform", output_shapes=((1000, 1000),),
            output_bytes=(4_000_000,)),
         Op("inputs", "StatelessRandomNormalV2",
            output_shapes=((1000, 1000),), output_bytes=(4_000_000,)),
         Op("truncated", "TruncatedNormal", output_shapes=((10, 10),),
            output_bytes=(400,)),
         Op("add", "AddV2", output_shapes=((1000, 1000),),
            output_bytes=(4_000_000,), flops=1e6)]
  graph = OpGraph(ops, [], graph_def=None)
  unmeasured = Device("/cpu:0", "CPU", 1e10, 1e9, 1e12, launch_overhead_s=0.0,
                      copy_bandwidth=1e9)
  measured = dataclasses.replace(unmeasured, name="/cpu:1",
                                 random_uniform_rate=2e8,
                                 random_normal_rate=5e7)
  work = AnalyticalCostModel().work_seconds(graph, Cluster("c", (unmeasured,
                                                                 measured)))
  # 1M values at 200 M/s: 5 ms, above the bytes' 4 ms; normal: 20 ms;
  # 100 values: their bytes (0.4 us) below 2 us of generation.
  np.testing.assert_allclose(work[:, 1], [5e-3, 2e-2, 2e-6, 4e-3])
  np.testing.assert_allclose(work[:, 0], [4e-3, 4e-3, 4e-7, 4e-3])
  # A device with 4 slots gives an op a quarter of its rate, as for flops.
  shared = dataclasses.replace(measured, slots=4)
  quarter = AnalyticalCostModel().work_seconds(graph, Cluster("c", (shared,)))
  np.testing.assert_allclose(quarter[:2, 0], [2e-2, 8e-2])
  # Without any measured rate the costs are the old ones, bit for bit.
  alone = AnalyticalCostModel().work_seconds(graph,
                                             Cluster("c", (unmeasured,)))
  assert np.array_equal(alone[:, 0], work[:, 0])


def test_half_precision_matrix_ops_run_at_the_tensor_core_rate():
  from tfplace.cost.cluster import Cluster
  # The same 2 GFLOP matmul in float32 and float16, a float16 Relu (no
  # tensor cores) and a float16 convolution.
  ops = [Op("mm32", "MatMul", output_dtypes=("float32",), flops=2e9),
         Op("mm16", "MatMul", output_dtypes=("float16",), flops=2e9),
         Op("mmbf", "BatchMatMulV2", output_dtypes=("bfloat16",), flops=2e9),
         Op("relu16", "Relu", output_dtypes=("float16",), flops=2e9),
         Op("conv16", "Conv2D", output_dtypes=("float16",), flops=2e9)]
  graph = OpGraph(ops, [], graph_def=None)
  plain = Device("/gpu:0", "GPU", peak_flops=1e12, memory_bandwidth=1e15,
                 memory_bytes=1e12, launch_overhead_s=0.0)
  cores = dataclasses.replace(plain, name="/gpu:1", half_flops=8e12)
  measured = dataclasses.replace(cores, name="/gpu:2", matmul_flops=6e11,
                                 conv_flops=3e11)
  work = AnalyticalCostModel(UNIT).work_seconds(
      graph, Cluster("c", (plain, cores, measured)))
  # Without tensor cores every op runs at 0.5 x 1e12: 4 ms.
  np.testing.assert_allclose(work[:, 0], [4e-3] * 5)
  # With them the half-precision matrix ops run 8x faster; Relu does not.
  np.testing.assert_allclose(work[:, 1], [4e-3, 5e-4, 5e-4, 4e-3, 5e-4])
  # Measured float32 rates are scaled by the same 8x.
  np.testing.assert_allclose(work[:, 2], [2e9 / 6e11, 2e9 / 4.8e12,
                                          2e9 / 4.8e12, 2e9 / 6e11,
                                          2e9 / 2.4e12])
  # Without any tensor-core device the costs are the old ones, bit for bit.
  alone = AnalyticalCostModel(UNIT).work_seconds(graph, Cluster("c", (plain,)))
  assert np.array_equal(alone[:, 0], work[:, 0])
