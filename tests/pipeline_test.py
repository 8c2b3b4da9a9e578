"""Tests for the pipeline: place, evaluate, simulate, recorded predictions."""

import tfplace  # noqa: F401  (before TensorFlow)

import numpy as np
import pytest

from tfplace import pipeline
from tfplace.cost.cluster import Cluster, Device
from tfplace.cost.op_costs import CostModel, OpCosts
from tfplace.cost.presets import cpu_cluster
from tfplace.errors import PlacementError
from tfplace.graph.op_graph import Edge, Op, OpGraph
from tfplace.placement import Placement

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"


class FixedCosts(CostModel):
  """Op i takes (i+1) ms on the CPU and (i+1)/10 ms on the GPU."""

  def estimate(self, graph, cluster):
    base = (np.arange(graph.num_ops) + 1.0) * 1e-3
    compute = np.stack([base, base / 10], axis=1)
    return OpCosts(compute, graph.param_bytes, graph.output_bytes)


def small():
  graph = OpGraph([Op("a", "MatMul"), Op("b", "MatMul")],
                  [Edge(0, 1, 0, 0)], None)
  cluster = Cluster("c", (Device(CPU, "CPU", 1e11, 1e10, 1e10),
                          Device(GPU0, "GPU", 1e12, 1e11, 1e10)))
  return graph, cluster


def test_place_predicts_step_time():
  graph, cluster = small()
  p = pipeline.place(graph, cluster, placer="single_cpu",
                     cost_model=FixedCosts())
  p.validate(graph, cluster)
  assert p.metadata.placer == "single_cpu"
  # a (1 ms) then b (2 ms) on the CPU, nothing transferred.
  assert p.metadata.predicted_step_time_s == pytest.approx(3e-3, rel=1e-6)
  p = pipeline.place(graph, cluster, placer="single_gpu",
                     cost_model=FixedCosts())
  assert p.metadata.predicted_step_time_s == pytest.approx(3e-4, rel=1e-6)
  assert p.metadata.feasible is True and p.metadata.oom_devices == ()
  # Outputs of 0 bytes, no weights: no device holds memory to record.
  assert p.metadata.predicted_peak_memory_bytes == {}


def test_place_passes_options_to_the_placer():
  graph, cluster = small()
  p = pipeline.place(graph, cluster, placer="m_etf", options="use_cpu=true",
                     cost_model=FixedCosts())
  assert p.metadata.placer == "m_etf"
  with pytest.raises(PlacementError, match="has no option"):
    pipeline.place(graph, cluster, placer="m_etf", options="nope=1")
  with pytest.raises(PlacementError, match="unknown placer"):
    pipeline.place(graph, cluster, placer="nope", cost_model=FixedCosts())


def test_place_reports_infeasible_in_typed_fields_and_json():
  graph = OpGraph([Op("v", "VarHandleOp", param_bytes=int(2e10))], [], None)
  _, cluster = small()
  p = pipeline.place(graph, cluster, placer="single_gpu",
                     cost_model=FixedCosts())
  assert p.metadata.predicted_step_time_s is None
  assert p.metadata.feasible is False
  assert p.metadata.oom_devices == (GPU0,)
  again = Placement.from_dict(p.to_dict())
  assert again.metadata.feasible is False
  assert again.metadata.oom_devices == (GPU0,)
  # The device's simulated peak is kept, in the JSON too: 20 GB of weights.
  assert p.metadata.predicted_peak_memory_bytes == {GPU0: int(2e10)}
  assert again.metadata.predicted_peak_memory_bytes == {GPU0: int(2e10)}


def test_old_placement_files_read_feasibility_into_the_typed_fields():
  data = {"placement": {"a": CPU},
          "metadata": {"placer": "x", "feasible": False,
                       "oom_devices": [GPU0], "custom": 1}}
  p = Placement.from_dict(data)
  assert p.metadata.feasible is False and p.metadata.oom_devices == (GPU0,)
  assert p.metadata.extra == {"custom": 1}
  assert p.to_dict()["metadata"]["custom"] == 1


def test_simulate_validates_placements():
  graph, cluster = small()
  good = Placement({"a": CPU, "b": GPU0})
  assert pipeline.simulate(graph, cluster, good,
                           cost_model=FixedCosts()).feasible
  with pytest.raises(PlacementError, match="not in graph"):
    pipeline.simulate(graph, cluster, Placement({"a": CPU, "b": CPU, "z": CPU}),
                      cost_model=FixedCosts())


def test_simulate_rejects_a_split_colocation_group():
  ops = [Op("v", "VarHandleOp"), Op("read", "ReadVariableOp")]
  graph = OpGraph(ops, [Edge(0, 1, 0, 0)], None,
                  colocation_groups=np.array([0, 0]))
  _, cluster = small()
  with pytest.raises(PlacementError, match="split"):
    pipeline.simulate(graph, cluster, Placement({"v": CPU, "read": GPU0}))


def test_simulate_convenience_uses_the_analytical_model():
  g = OpGraph([Op("op0", "MatMul", output_bytes=(100,)),
               Op("op1", "MatMul", output_bytes=(100,))],
              [Edge(0, 1, 0, 100)], None)
  r = pipeline.simulate(g, cpu_cluster(2), np.array([0, 0]))
  # MatMul with no FLOPs: op0 moves 100 bytes (its output), op1 200 (input
  # and output), at 0.7 * 2e10 B/s, plus 5 us overhead each.
  expected = 300 / (0.7 * 2e10) + 2 * 5e-6
  assert r.step_time_s == pytest.approx(expected)
