"""`str(SimResult)`: step time, then busy time and peak memory per device,
with the cluster's device names and units."""

import json

import numpy as np

import tfplace  # noqa: F401
from tfplace.cost.op_costs import OpCosts
from tfplace.cost.presets import cpu_cluster
from tfplace.graph.op_graph import Edge, Op, OpGraph
from tfplace.simulator.simulator import Simulator


def _result(memory_bytes=8 * 2**30):
  """Two 1 ms ops, 3 KiB each, one per device, a -> b."""
  ops = [Op("a", "MatMul", output_bytes=(3072,)),
         Op("b", "MatMul", output_bytes=(3072,))]
  graph = OpGraph(ops, [Edge(0, 1, 0, 3072)], graph_def=None)
  cluster = cpu_cluster(2, memory_bytes=memory_bytes)
  costs = OpCosts(compute_s=np.full((2, 2), 1e-3),
                  param_bytes=np.zeros(2, np.int64),
                  output_bytes=np.full(2, 3072, np.int64))
  return Simulator(graph, cluster, costs).simulate(np.array([0, 1])), cluster


def test_str_names_devices_with_units():
  result, cluster = _result()
  text = str(result)
  assert text.splitlines()[0].startswith("step time 2.")
  for name in cluster.device_names:
    assert name in text
  assert "busy ms" in text and "1.000" in text
  assert "6.0 KiB of 8.0 GiB" in text  # a's output and b's received copy
  assert "moved between devices: 3.0 KiB" in text
  assert "SimResult(" not in text


def test_str_of_an_infeasible_result_names_the_device():
  result, cluster = _result(memory_bytes=4096)
  assert not result.feasible
  text = str(result)
  assert text.startswith("infeasible: out of memory on ")
  assert cluster.device_names[1] in text.splitlines()[0]
  assert "OUT OF MEMORY" in text


def test_format_takes_names_for_results_built_without_them():
  result, _ = _result()
  bare = type(result)(result.step_time_s, True, result.device_busy_s,
                      result.peak_memory_bytes, 0)
  assert "device 1" in str(bare)
  assert "gpu:7" in bare.format(["cpu:0", "gpu:7"])


def test_to_dict_is_json_by_device_name():
  result, cluster = _result()
  data = json.loads(json.dumps(result.to_dict()))
  first, second = cluster.device_names
  assert data["feasible"] is True
  assert data["step_time_s"] == result.step_time_s
  # a's output on the first; b's output and its received copy of a's on the
  # second.
  assert data["peak_memory_bytes"] == {first: 3072, second: 6144}
  assert data["device_busy_s"] == {first: 1e-3, second: 1e-3}
  assert data["bytes_moved"] == 3072 and data["oom_devices"] == []
  assert data["transfers"] == 1  # a's output, to the second device


def test_to_dict_of_an_infeasible_result():
  result, cluster = _result(memory_bytes=4096)
  data = result.to_dict()
  assert data["step_time_s"] is None and data["feasible"] is False
  assert data["oom_devices"] == [cluster.device_names[1]]
