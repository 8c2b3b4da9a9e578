"""The kernel's arrays restricted to the training step, and parallel batches."""

import dataclasses

import numpy as np
import pytest

import tfplace  # noqa: F401
from tfplace.cost.analytical import AnalyticalCostModel
from tfplace.cost.presets import load_cluster
from tfplace.models.synthetic import towers
from tfplace.simulator import kernel_arrays
from tfplace.simulator.simulator import Simulator


def test_restricting_to_every_op_changes_nothing():
  graph = towers(num_towers=2, layers=2, seed=1)
  full = kernel_arrays.graph_arrays(graph)
  same = kernel_arrays.restrict(full, np.ones(graph.num_ops, dtype=bool))
  for field in dataclasses.fields(full):
    np.testing.assert_array_equal(getattr(same, field.name),
                                  getattr(full, field.name), field.name)


def test_restricting_to_the_step_keeps_its_ops_in_order():
  graph = towers(num_towers=2, layers=2, seed=1)
  step = graph.step_mask
  assert not step.all()
  sub = kernel_arrays.restrict(kernel_arrays.graph_arrays(graph), step)
  np.testing.assert_array_equal(sub.ops, np.flatnonzero(step))
  assert sorted(sub.topo.tolist()) == list(range(sub.num_ops))
  assert (sub.succ < sub.num_ops).all() and (sub.cons < sub.num_ops).all()


def test_a_set_not_closed_under_predecessors_is_rejected():
  graph = towers(num_towers=2, layers=2, seed=1)
  keep = np.ones(graph.num_ops, dtype=bool)
  keep[graph.index["head/loss"]] = False  # Its consumers stay.
  with pytest.raises(ValueError, match="closed under predecessors"):
    kernel_arrays.restrict(kernel_arrays.graph_arrays(graph), keep)


def test_parallel_batches_give_the_same_step_times():
  graph = towers(num_towers=3, layers=3, seed=2)
  cluster = load_cluster("k80x4")
  sim = Simulator(graph, cluster,
                  AnalyticalCostModel().op_costs(graph, cluster))
  rng = np.random.default_rng(0)
  groups = rng.integers(1, cluster.num_devices,
                        size=(9, graph.num_colocation_groups))
  ids = groups[:, graph.group_of]
  ids[:, np.isinf(sim.costs.compute_s[:, 1])] = 0  # CPU-only ops.
  one = sim.simulate_batch(ids)
  np.testing.assert_array_equal(sim.simulate_batch(ids, num_threads=2), one)
  np.testing.assert_array_equal(sim.simulate_batch(ids, num_threads=0), one)
  assert np.isfinite(one).all()
  assert one.tolist() == [sim.simulate(row).step_time_s for row in ids]


def test_all_cores_means_the_ones_this_process_may_use(monkeypatch):
  from tfplace.simulator import simulator
  monkeypatch.setattr(simulator.os, "sched_getaffinity", lambda pid: {0, 3},
                      raising=False)
  monkeypatch.setattr(simulator.numba.config, "NUMBA_NUM_THREADS", 8)
  assert simulator.usable_threads() == 2
  monkeypatch.setattr(simulator.numba.config, "NUMBA_NUM_THREADS", 1)
  assert simulator.usable_threads() == 1
