"""Tests of the memory-pressure comparison behind scripts/memory_pressure.py."""

import tfplace  # noqa: F401  (before TensorFlow)

import math

from tfplace.cost.presets import load_cluster
from tfplace.experiments.memory_pressure import (one_accelerator_peak,
                                                 pressure_rows, shrunk)
from tfplace.models.registry import build_model
from tfplace.placers.problem import PlacementProblem


def test_shrunk_sets_the_accelerators_memory_only():
  cluster = load_cluster("k80x2")
  small = shrunk(cluster, 1e6)
  for before, after in zip(cluster.devices, small.devices):
    expected = before.memory_bytes if before.type == "CPU" else 1e6
    assert after.memory_bytes == expected
    assert after.name == before.name


def test_the_default_is_never_slower_than_the_published_estimate():
  graph = build_model("mlp_towers")
  cluster = load_cluster("k80x2")
  rows = pressure_rows(graph, cluster, [1.0, 0.3], placers=("m_etf",))
  assert [(r.memory_fraction_of_peak, r.placer) for r in rows] == [
      (1.0, "m_etf"), (0.3, "m_etf")]
  for r in rows:
    assert r.default_s <= r.published_s
    assert 0.0 <= r.share <= 1.0
  peak = one_accelerator_peak(PlacementProblem.build(graph, cluster))
  assert peak > 0 and math.isfinite(peak)
