"""Tests for tfplace.measurement.calibration_runs: the split runs' second
pass (no real runs: the measurement is replaced by made-up step times)."""

import pytest

import tfplace  # noqa: F401
from tfplace.measurement import calibration_runs
from tfplace.measurement.batch import MeasureOutcome
from tfplace.measurement.calibration_runs import (GraphRuns,
                                                  measure_splits_again,
                                                  suite_placements)
from tfplace.measurement.local_cluster import make_worker_cluster
from tfplace.measurement.timing import StepTiming
from tfplace.models.registry import build_model


def _outcome(step_s, key="k"):
  if step_s is None:
    return MeasureOutcome(key, None, "it failed")
  return MeasureOutcome(key, StepTiming(step_s, step_s, step_s, 0.0, 0.0,
                                        (step_s,)))


@pytest.fixture(name="two_graphs")
def fixture_two_graphs():
  cluster = make_worker_cluster(2)
  runs = []
  for name, first in (("calib_matmul", (1e-3, 1e-3, 2.0e-3, 3.0e-3)),
                      ("calib_elementwise", (1e-3, 1e-3, 4.0e-3, None))):
    graph = build_model(name, batch_size=4)
    placements = tuple(suite_placements(graph, cluster))
    assert [label for label, _ in placements] == [
        "on_0", "on_1", "halves", "random"]
    runs.append(GraphRuns(name, graph, placements,
                          tuple(_outcome(t) for t in first)))
  return cluster, runs


def test_a_split_run_keeps_its_second_pass_only_where_the_first_was_slow(
    two_graphs, monkeypatch, tmp_path):
  cluster, runs = two_graphs
  calls = []
  second = {"calib_matmul": (1.6e-3, 2.8e-3),  # 2.0 > 1.15 x 1.6: slow.
            "calib_elementwise": (3.9e-3, 5.0e-3)}

  def fake_measure(graph, placements, config, **kwargs):
    calls.append((graph.name, len(placements), kwargs["cache_dir"],
                  kwargs["rounds"]))
    return [_outcome(t, "again") for t in second[graph.name]]

  monkeypatch.setattr(calibration_runs, "measure_rounds", fake_measure)
  again, said = measure_splits_again(runs, cluster, None,
                                     cache_dir=str(tmp_path), rounds=1)
  # Graphs in reverse order, only their two split runs, in their own cache.
  assert calls == [(name, 2, str(tmp_path / "second_pass"), 1)
                   for name in ("calib_elementwise", "calib_matmul")]
  matmul, elementwise = again
  # One-device runs are left as they were.
  assert matmul.outcomes[:2] == runs[0].outcomes[:2]
  # halves: the first pass took 2.0 / 1.6 = 1.25x the second: the second.
  assert matmul.outcomes[2].placement_key == "again"
  assert matmul.outcomes[2].round_step_times_s == (2.0e-3, 1.6e-3)
  # random: 3.0 / 2.8 = 1.07x: the first, with both passes' steps.
  assert matmul.outcomes[3].placement_key == "k"
  assert matmul.outcomes[3].timing.median_step_time_s == 3.0e-3
  assert matmul.outcomes[3].round_step_times_s == (3.0e-3, 2.8e-3)
  # A second pass that is faster by less than the gap is not taken.
  assert elementwise.outcomes[2].placement_key == "k"
  # A run that failed the first time keeps its second measurement.
  assert elementwise.outcomes[3].placement_key == "again"
  assert elementwise.outcomes[3].round_step_times_s == (5.0e-3,)
  assert "the second pass kept for 2 of 4" in said


def test_a_failed_second_pass_keeps_the_first(two_graphs, monkeypatch):
  cluster, runs = two_graphs
  monkeypatch.setattr(calibration_runs, "measure_rounds",
                      lambda graph, placements, config, **kwargs: [
                          _outcome(None) for _ in placements])
  again, said = measure_splits_again(runs, cluster, None)
  assert [r.outcomes for r in again] == [r.outcomes for r in runs]
  assert "kept for 0 of 4" in said


def test_one_device_runs_alone_are_not_measured_again(monkeypatch):
  cluster = make_worker_cluster(2)
  graph = build_model("calib_matmul", batch_size=4)
  placements = tuple(suite_placements(graph, cluster, splits=False))
  runs = [GraphRuns("calib_matmul", graph, placements,
                    tuple(_outcome(1e-3) for _ in placements))]
  monkeypatch.setattr(calibration_runs, "measure_rounds",
                      lambda *args, **kwargs: pytest.fail("measured"))
  assert measure_splits_again(runs, cluster, None) == (runs, "")
