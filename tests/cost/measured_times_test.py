"""Measured per-op times in place of a model's estimates."""

import numpy as np
import pytest

import tfplace  # noqa: F401
from tfplace.cost.analytical import AnalyticalConfig, AnalyticalCostModel
from tfplace.cost.cluster import Device, make_cluster
from tfplace.cost.measured_times import ProfiledCostModel
from tfplace.graph.op_graph import Op, OpGraph

UNIT = AnalyticalConfig(compute_efficiency={"CPU": 1.0, "GPU": 1.0},
                        memory_efficiency=1.0)


def cluster():
  cpu = Device("/device:CPU:0", "CPU", 1e9, 1e9, 1e12, launch_overhead_s=0.0)
  gpu = Device("/device:GPU:0", "GPU", 4e9, 1e10, 1e12, launch_overhead_s=0.0)
  return make_cluster("c", [cpu, gpu])


def graph():
  ops = [Op("a", "MatMul", output_bytes=(0,), flops=2e9),
         Op("b", "Conv2D", output_bytes=(0,), flops=4e9),
         Op("c", "NcclAllReduce", output_bytes=(0,), flops=4e9,
            kernels=frozenset({"GPU"}))]
  return OpGraph(ops, [], graph_def=None)


def test_profiled_times_override_the_fallback():
  model = ProfiledCostModel({"a": {"CPU": 0.5}, "c": {"CPU": 7.0, "GPU": 0.25},
                             "missing": {"GPU": 1.0}},
                            AnalyticalCostModel(UNIT), scale={"GPU": 2.0})
  s = model.op_costs(graph(), cluster()).compute_s
  assert s[0] == pytest.approx([0.5, 0.5])   # GPU from the fallback: 2e9/4e9
  assert s[1] == pytest.approx([4.0, 1.0])   # all fallback
  assert s[2, 0] == np.inf                   # no CPU kernel stays inf
  assert s[2, 1] == pytest.approx(0.5)       # 0.25 * scale 2
