"""Tests for the placer registry and the top-level `place`."""

import tfplace  # noqa: F401  (before TensorFlow)

import numpy as np
import pytest

from tfplace.cost.cluster import Cluster, Device
from tfplace.cost.op_costs import CostModel, OpCosts
from tfplace.errors import PlacementError
from tfplace.graph.op_graph import Edge, Op, OpGraph
from tfplace.placement import Placement
from tfplace.placers import registry
from tfplace.placers.base import Placer

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"

BASELINES = ["critical_path", "expert", "hash", "metis", "round_robin",
             "scotch", "single_cpu", "single_gpu"]


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


def test_list_placers_has_the_baselines():
  names = registry.list_placers()
  assert set(BASELINES) <= set(names)
  assert names == sorted(names)


@pytest.mark.parametrize("name", BASELINES)
def test_get_placer_by_name(name):
  placer = registry.get_placer(name)
  assert isinstance(placer, Placer)
  assert placer.name == name


def test_unknown_placer_lists_names():
  with pytest.raises(PlacementError, match="unknown placer 'nope'.*single_gpu"):
    registry.get_placer("nope")
  with pytest.raises(PlacementError, match="unknown placer"):
    registry.place(*small(), placer="nope", cost_model=FixedCosts())


def test_register_placer_decorator(monkeypatch):
  monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))

  @registry.register_placer("everything_on_last")
  class Last(Placer):

    def __init__(self, offset=0):
      self.offset = offset

    def place(self, graph, cluster, costs, seed=None):
      ids = np.full(graph.num_ops, cluster.num_devices - 1 - self.offset)
      return Placement.from_array(graph, cluster, ids)

  assert Last.name == "everything_on_last"
  assert "everything_on_last" in registry.list_placers()
  assert registry.get_placer("everything_on_last", offset=1).offset == 1
  with pytest.raises(PlacementError, match="bad options"):
    registry.get_placer("everything_on_last", colour="red")
  with pytest.raises(ValueError, match="already registered"):
    registry.register_placer("everything_on_last")(type("Other", (Placer,), {}))
  p = registry.place(*small(), placer="everything_on_last",
                     cost_model=FixedCosts())
  assert set(p.devices.values()) == {GPU0}
  assert p.metadata.placer == "everything_on_last"


def test_place_predicts_step_time():
  graph, cluster = small()
  p = registry.place(graph, cluster, placer="single_cpu",
                     cost_model=FixedCosts())
  p.validate(graph, cluster)
  assert p.metadata.placer == "single_cpu"
  # a (1 ms) then b (2 ms) on the CPU, nothing transferred.
  assert p.metadata.predicted_step_time_s == pytest.approx(3e-3, rel=1e-6)
  p = registry.place(graph, cluster, placer="single_gpu",
                     cost_model=FixedCosts())
  assert p.metadata.predicted_step_time_s == pytest.approx(3e-4, rel=1e-6)
  assert p.metadata.extra["feasible"] is True


def test_place_reports_infeasible():
  graph = OpGraph([Op("v", "VarHandleOp", param_bytes=int(2e10))], [], None)
  _, cluster = small()
  p = registry.place(graph, cluster, placer="single_gpu",
                     cost_model=FixedCosts())
  assert p.metadata.predicted_step_time_s is None
  assert p.metadata.extra["feasible"] is False
  assert p.metadata.extra["oom_devices"] == [GPU0]
