"""CP-SAT: the task graph, a proven optimum, memory as a hard constraint."""

import numpy as np

from tfplace.cost.op_costs import OpCosts
from tfplace.graph.op_graph import Edge, Op, OpGraph
from tfplace.placers.cp_sat import CpSatConfig, cp_sat_search
from tfplace.placers.cp_sat_model import build_tasks, list_schedule
from tfplace.placers.search_support import Budget
import search_testlib as lib


def test_tasks_are_runs_of_one_group_and_form_a_dag():
  # a -> b -> c -> d with a, d in group 0 (a variable read and its update)
  # and b, c in group 1: three tasks [a], [b, c], [d].
  ops = [Op(n, "MatMul", output_bytes=(4,)) for n in "abcd"]
  edges = [Edge(0, 1, 0, 4), Edge(1, 2, 0, 4), Edge(2, 3, 0, 4)]
  graph = OpGraph(ops, edges, graph_def=None)
  costs = OpCosts(np.array([[1.0], [2.0], [3.0], [4.0]]), np.zeros(4, int),
                  np.zeros(4, int))
  tasks = build_tasks(graph, costs, np.array([0, 1, 1, 0]))
  assert tasks.group.tolist() == [0, 1, 0]
  assert tasks.duration_s[:, 0].tolist() == [1.0, 5.0, 4.0]
  assert list(zip(tasks.edge_src, tasks.edge_dst)) == [(0, 1), (1, 2)]
  start, end = list_schedule(tasks, np.array([0, 0]), np.array(
      [[1], [5], [4]]), np.zeros(2, int), np.array([1]))
  assert start.tolist() == [0, 1, 6] and end.tolist() == [1, 6, 10]


def _solve(graph, costs, memory_bytes=1e12, start=None):
  space, sim, cluster = lib.space(graph, costs, memory_bytes=memory_bytes)
  tasks = build_tasks(graph, costs, space.groups.group_of)
  start = np.zeros(space.groups.num_groups, np.int32) if start is None else (
      start)
  result = cp_sat_search(space, tasks, cluster, start, Budget(seconds=20),
                         CpSatConfig(num_workers=2), seed=0, progress=False)
  return result, sim


def test_proves_the_balanced_placement_optimal():
  result, _ = _solve(*lib.independent_ops(4))
  assert result.extra["solver_status"] == "OPTIMAL"
  assert result.extra["gap"] == 0.0
  assert abs(result.extra["model_makespan_s"] - 2.0) < 1e-3
  assert result.step_time_s == 2.0 and result.start_step_time_s == 4.0


def test_memory_is_a_hard_constraint():
  # Parameters + outputs of each op: 108 bytes; 250 bytes per device: two
  # ops per device, and the start (all on device 0) is infeasible.
  graph, costs = lib.independent_ops(4, param_bytes=100)
  result, sim = _solve(graph, costs, memory_bytes=250)
  assert result.extra["solver_status"] == "OPTIMAL"
  assert np.bincount(result.group_devices, minlength=2).tolist() == [2, 2]
  assert sim.simulate(result.group_devices).feasible


def test_an_impossible_memory_limit_is_reported_infeasible():
  graph, costs = lib.independent_ops(4, param_bytes=100)
  result, _ = _solve(graph, costs, memory_bytes=150)
  assert result.extra["solver_status"] == "INFEASIBLE"
  assert result.extra["gap"] is None


def test_activations_are_charged_so_that_the_start_fits():
  import dataclasses as dc
  from tfplace.placers.cp_sat import activation_fraction

  @dc.dataclass
  class Groups:
    param_bytes: np.ndarray
    output_bytes: np.ndarray

  groups = Groups(np.array([100, 100, 0]), np.array([400, 0, 200]))
  start = np.array([0, 1, 1])
  # Device 0: 100 + f * 400 <= 300 -> f <= 0.5; device 1: 100 + f * 200 <= 1000.
  assert activation_fraction(groups, start, np.array([300.0, 1000.0])) == 0.5
  assert activation_fraction(groups, start, np.array([1e4, 1e4])) == 1.0
  assert activation_fraction(groups, start, np.array([50.0, 1e4])) == 0.0
