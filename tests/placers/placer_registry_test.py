"""Tests for the placer registry and placer options."""

import tfplace  # noqa: F401  (before TensorFlow)

import numpy as np
import pytest

import dataclasses

from tfplace.cost.cluster import Cluster, Device
from tfplace.errors import PlacementError
from tfplace.graph.op_graph import Edge, Op, OpGraph
from tfplace.placement import Placement
from tfplace.placers import registry
from tfplace.placers.base import Placer, PlacerKind
from tfplace.placers.problem import PlacementProblem

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"

BASELINES = ["critical_path", "expert", "hash", "metis", "round_robin",
             "scotch", "single_cpu", "single_gpu"]


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


def test_kinds():
  assert set(registry.list_placers(PlacerKind.HEURISTIC)) >= set(BASELINES)
  assert "m_etf" in registry.list_placers(PlacerKind.HEURISTIC)
  assert not set(registry.list_placers(PlacerKind.LEARNED)) & set(BASELINES)


@dataclasses.dataclass(frozen=True)
class LastOptions:
  """Options of the test placer.

  Attributes:
    offset: how many devices before the last one.
    verbose: unused.
    note: unused.
  """
  offset: int = 0
  verbose: bool = False
  note: str = ""


def _register_last(monkeypatch):
  monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))

  @registry.register_placer("everything_on_last")
  class Last(Placer):
    kind = PlacerKind.SEARCH
    Options = LastOptions

    def place(self, problem, seed=None):
      d = problem.cluster.num_devices - 1 - self.options.offset
      return problem.placement(np.full(problem.groups.num_groups, d))

  return Last


def test_register_placer_decorator(monkeypatch):
  last = _register_last(monkeypatch)
  assert last.name == "everything_on_last"
  assert "everything_on_last" in registry.list_placers(PlacerKind.SEARCH)
  with pytest.raises(ValueError, match="already registered"):
    registry.register_placer("everything_on_last")(type("Other", (Placer,), {}))
  graph, cluster = small()
  p = registry.get_placer("everything_on_last").place(
      PlacementProblem.build(graph, cluster))
  assert set(p.devices.values()) == {GPU0}


@pytest.mark.parametrize("given", [
    {"offset": 1, "verbose": True}, "offset=1,verbose=yes",
    " offset = 1 , verbose=true ", LastOptions(offset=1, verbose=True)])
def test_options_from_dict_text_or_instance(monkeypatch, given):
  _register_last(monkeypatch)
  placer = registry.get_placer("everything_on_last", given)
  assert placer.options == LastOptions(offset=1, verbose=True)


@pytest.mark.parametrize("given, message", [
    ("colour=red", "has no option colour; its options: offset, verbose, note"),
    ("offset=x", "option offset must be int, got 'x'"),
    ("verbose=maybe", "option verbose must be bool"),
    ("offset", "bad placer option 'offset'"),
    (3, "options must be a LastOptions"),
])
def test_bad_options_are_clear_errors(monkeypatch, given, message):
  _register_last(monkeypatch)
  with pytest.raises(PlacementError, match=message):
    registry.get_placer("everything_on_last", given)


def test_baechi_options_are_checked():
  placer = registry.get_placer("m_etf", "memory_fraction=0.5,use_cpu=true")
  assert placer.options.memory_fraction == 0.5 and placer.options.use_cpu
  with pytest.raises(PlacementError, match="memory_fraction must be in"):
    registry.get_placer("m_etf", {"memory_fraction": 0.0})


def test_describe_placers_lists_every_placer_and_its_options():
  text = registry.describe_placers()
  for name in BASELINES:
    assert f"  {name} (heuristic)" in text
  assert "memory_fraction (float, default 1.0)" in text
  assert "single_cpu (heuristic): no options" in text


def test_placers_that_ignore_the_seed_say_so():
  from tfplace.cost.presets import load_cluster
  from tfplace.models.synthetic import build_synthetic
  graph = build_synthetic("layered_dag", num_ops=300, width=12, seed=1)
  problem = PlacementProblem.build(graph, load_cluster("k80x2"))

  def devices(name, seed):
    placement = registry.get_placer(name).place(problem, seed)
    return placement.to_array(graph, problem.cluster).tolist()

  fixed = [n for n in registry.list_placers()
           if not registry.get_placer(n).uses_seed]
  assert {"m_etf", "expert", "single_gpu", "multi_objective"} <= set(fixed)
  for name in fixed:
    assert devices(name, 0) == devices(name, 5), name
  # The check tells a seeded placer apart.
  assert registry.get_placer("hash").uses_seed
  assert devices("hash", 0) != devices("hash", 5)
