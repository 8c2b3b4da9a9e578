"""Simulated against measured peak memory per device."""

import math

import numpy as np

import tfplace  # noqa: F401
from tfplace.experiments.memory_fidelity import (MemoryRow, memory_rows,
                                                 summarize)
from tfplace.measurement.batch import MeasureOutcome
from tfplace.measurement.local_cluster import make_worker_cluster
from tfplace.measurement.timing import timing_from_steps
from tfplace.models.registry import build_model
from tfplace.pipeline import simulate
from tfplace.placement import Placement


def _outcome(peaks):
  return MeasureOutcome("key", timing_from_steps(
      np.full(2, 1e-3), peak_memory_bytes=peaks))


def test_a_row_per_device_used_or_measured_against_its_simulated_peak():
  cluster = make_worker_cluster(2)
  d0, d1 = cluster.device_names
  graph = build_model("mlp_towers", num_towers=2, hidden=8, batch_size=4,
                      input_size=8, num_layers=1)
  alone = Placement.from_array(graph, cluster,
                               np.zeros(graph.num_ops, np.int32))
  split = Placement.from_array(graph, cluster, graph.group_of % 2)
  labelled = [("alone", alone), ("split", split), ("failed", split),
              ("no stats", split)]
  results = [simulate(graph, cluster, p) for _, p in labelled]
  sim_alone = int(results[0].peak_memory_bytes[0])
  sim_split = [int(x) for x in results[1].peak_memory_bytes]
  assert results[0].peak_memory_bytes[1] == 0 and min(sim_split) > 0
  outcomes = [_outcome({d0: 2 * sim_alone, d1: 100}),
              _outcome({d0: sim_split[0], d1: sim_split[1] // 2}),
              MeasureOutcome("key", None, error="worker died"),
              _outcome({})]
  rows = memory_rows(graph, cluster, labelled, results, outcomes)
  assert rows == [
      MemoryRow(graph.name, "alone", d0, sim_alone, 2 * sim_alone),
      MemoryRow(graph.name, "alone", d1, 0, 100),
      MemoryRow(graph.name, "split", d0, sim_split[0], sim_split[0]),
      MemoryRow(graph.name, "split", d1, sim_split[1], sim_split[1] // 2)]
  assert math.isinf(rows[1].ratio)
  summary = summarize(rows)  # The device the simulator left empty is out.
  assert summary.num_devices == 3 and summary.under_predicted == 1
  assert summary.max_ratio == 2.0 and summary.median_ratio == 1.0
  assert summary.min_ratio == (sim_split[1] // 2) / sim_split[1]
  assert summarize([]).num_devices == 0
