"""The search placers through the pipeline: kinds, options, never worse."""

import pytest

from tfplace import pipeline
from tfplace.cost.presets import load_cluster
from tfplace.errors import PlacementError
from tfplace.models.synthetic import towers
from tfplace.placers.base import PlacerKind
from tfplace.placers.registry import get_placer, list_placers

SEARCHES = ["local_search", "cross_entropy", "cp_sat"]


def test_kinds():
  assert set(SEARCHES) <= set(list_placers(PlacerKind.SEARCH))
  assert "multi_objective" in list_placers(PlacerKind.HEURISTIC)


@pytest.mark.parametrize("placer", SEARCHES)
def test_a_search_is_never_worse_than_its_start(placer):
  graph, cluster = towers(num_towers=3, layers=3, seed=4), load_cluster("k80x4")
  options = {"budget_s": 20, "max_evaluations": 300, "init": "round_robin",
             "progress": False, "coarsen_k": 24}
  placement = pipeline.place(graph, cluster, placer, options=options, seed=0)
  search = placement.metadata.extra["search"]
  assert search["start"] == "round_robin"
  assert placement.metadata.feasible
  assert placement.metadata.predicted_step_time_s <= search["start_step_time_s"]
  assert search["evaluations"] <= 300 + 64
  if placer == "cp_sat":
    assert search["solver_status"] in ("OPTIMAL", "FEASIBLE")
    assert 0.0 <= search["gap"] <= 1.0


def test_best_heuristic_start_is_the_fastest_heuristic():
  graph, cluster = towers(num_towers=2, layers=2, seed=1), load_cluster("k80x2")
  placement = pipeline.place(
      graph, cluster, "local_search", seed=0,
      options={"max_evaluations": 1, "progress": False})
  search = placement.metadata.extra["search"]
  assert "best of" in search["start"]
  best = min(pipeline.place(graph, cluster, name).metadata.predicted_step_time_s
             for name in list_placers(PlacerKind.HEURISTIC))
  assert search["start_step_time_s"] == pytest.approx(best)


@pytest.mark.parametrize("options, message", [
    ({"budget_s": 0}, "positive number of seconds"),
    ({"budget_s": -1.5}, "positive number of seconds"),
    ({"max_evaluations": -1}, "max_evaluations must be >= 0"),
    ({"coarsen_method": "spectral"}, "coarsen_method"),
    ({"num_threads": -1}, "num_threads"),
    ({"unit_fraction": 1.0}, "unit_fraction must be in"),
    ({"unit_fraction": -0.1}, "unit_fraction must be in"),
    ({"unit_chunks": 0}, "unit_chunks must be >= 1"),
])
def test_bad_options_are_clear_errors(options, message):
  with pytest.raises(PlacementError, match=message):
    get_placer("local_search", options)


def test_multi_objective_weights_must_not_be_negative():
  with pytest.raises(PlacementError, match="traffic_weight must be >= 0"):
    get_placer("multi_objective", {"traffic_weight": -1})


def test_the_best_step_time_curve_goes_to_tf_summary(tmp_path):
  import tensorflow as tf
  graph, cluster = towers(num_towers=2, layers=2, seed=1), load_cluster("k80x2")
  placement = pipeline.place(
      graph, cluster, "local_search", seed=0,
      options={"max_evaluations": 200, "init": "round_robin",
               "progress": False, "summary_dir": str(tmp_path)})
  history = placement.metadata.extra["search"]["history"]
  values = []
  for path in tmp_path.iterdir():
    for event in tf.compat.v1.train.summary_iterator(str(path)):
      for value in event.summary.value:
        values.append((event.step, float(tf.make_ndarray(value.tensor))))
  assert [v[0] for v in values] == [h[0] for h in history]
  assert values[-1][1] == pytest.approx(history[-1][2])


@pytest.mark.parametrize("placer", ["local_search", "cross_entropy"])
def test_candidates_are_distinct_and_ranked_on_the_simulator(placer):
  from tfplace.placers.problem import PlacementProblem
  graph, cluster = towers(num_towers=3, layers=3, seed=4), load_cluster("k80x4")
  problem = PlacementProblem.build(graph, cluster)
  options = {"max_evaluations": 200, "init": "round_robin", "progress": False,
             "coarsen_k": 24}
  candidates = get_placer(placer, options).place_candidates(problem, 5, 0)
  assert len(candidates) == 5
  arrays = [c.to_array(graph, cluster) for c in candidates]
  assert len({a.tobytes() for a in arrays}) == 5
  times = [pipeline.evaluate(problem, c).step_time_s for c in candidates]
  assert times == sorted(times)  # the best first, then fastest first
  assert "search" in candidates[0].metadata.extra
  best = pipeline.place(graph, cluster, placer, options=options, seed=0)
  assert best.devices == candidates[0].devices


def test_a_one_pass_placer_has_one_candidate():
  from tfplace.placers.problem import PlacementProblem
  graph, cluster = towers(num_towers=2, layers=2, seed=1), load_cluster("k80x2")
  problem = PlacementProblem.build(graph, cluster)
  assert len(get_placer("m_etf").place_candidates(problem, 5)) == 1


def test_search_over_the_learned_placers_units_moves_whole_units():
  import numpy as np
  from tfplace.placers.problem import PlacementProblem
  from tfplace.grouping.chunks import units
  graph, cluster = towers(num_towers=3, layers=3, seed=4), load_cluster("k80x4")
  problem = PlacementProblem.build(graph, cluster)
  start = pipeline.place(graph, cluster, "round_robin")
  placement = pipeline.place(
      graph, cluster, "local_search", seed=0,
      options={"max_evaluations": 300, "init": "round_robin",
               "progress": False, "coarsen_k": 6,
               "coarsen_method": "start_chunks"})
  start_groups = start.to_array(graph, cluster)[
      [m[0] for m in problem.groups.members]]
  unit_of = units(problem.groups, start_groups, 6)
  devices = placement.to_array(graph, cluster)[
      [m[0] for m in problem.groups.members]]
  assert len(set(unit_of.tolist())) > 6  # The chunks split by device.
  for unit in set(unit_of.tolist()):
    assert len(set(devices[unit_of == unit].tolist())) == 1
  search = placement.metadata.extra["search"]
  assert placement.metadata.predicted_step_time_s < search["start_step_time_s"]


def test_local_search_first_searches_units_then_the_groups():
  import numpy as np
  from tfplace.placers.problem import PlacementProblem
  graph, cluster = towers(num_towers=3, layers=3, seed=4), load_cluster("k80x4")
  problem = PlacementProblem.build(graph, cluster)
  placement = pipeline.place(
      graph, cluster, "local_search", seed=0,
      options={"max_evaluations": 400, "init": "round_robin",
               "progress": False, "unit_chunks": 6})
  search = placement.metadata.extra["search"]
  units, groups = search["stages"]
  assert (units["stage"], groups["stage"]) == ("units", "colocation groups")
  assert units["groups"] < groups["groups"] == problem.groups.num_groups
  assert units["evaluations"] <= 160 + 1  # 0.4 of the budget (+ the start)
  assert units["evaluations"] + groups["evaluations"] == search["evaluations"]
  assert search["evaluations"] <= 400 + 1
  assert groups["step_time_s"] <= units["step_time_s"] <= (
      search["start_step_time_s"])
  assert placement.metadata.predicted_step_time_s == pytest.approx(
      groups["step_time_s"])
  curve = np.array([h[2] for h in search["history"]])
  assert (np.diff(curve) < 0).all()
  assert np.diff([h[0] for h in search["history"]]).min() > 0


def test_the_unit_stage_starts_from_the_same_placement():
  import numpy as np
  from tfplace.placers.problem import PlacementProblem
  from tfplace.placers.search_support import start_placement
  graph, cluster = towers(num_towers=3, layers=3, seed=4), load_cluster("k80x4")
  problem = PlacementProblem.build(graph, cluster)
  placer = get_placer("local_search", {"init": "round_robin"})
  start = start_placement(problem, "round_robin")
  context = placer._context(problem, start, 0)
  stage = placer.unit_stage(context, 6)
  assert stage.space.groups.num_groups < problem.groups.num_groups
  assert (stage.start[stage.unit_of] == start.group_devices).all()
  step = stage.space.evaluate(stage.start[None, :])[0]
  assert step == pytest.approx(start.step_time_s)
  # Searching coarsened groups already: no unit stage.
  coarse = get_placer("local_search", {"coarsen_k": 24})
  assert coarse.unit_stage(coarse._context(problem, start, 0), 6) is None


def test_without_a_unit_stage_local_search_has_one_stage():
  graph, cluster = towers(num_towers=2, layers=2, seed=1), load_cluster("k80x2")
  placement = pipeline.place(
      graph, cluster, "local_search", seed=0,
      options={"max_evaluations": 100, "init": "round_robin",
               "progress": False, "unit_fraction": 0})
  assert "stages" not in placement.metadata.extra["search"]
