"""Tests for tfplace.experiments.fidelity helpers (no real runs)."""

import dataclasses
import math

import numpy as np
import pytest

import tfplace  # noqa: F401
from tfplace.experiments import fidelity, fidelity_report
from tfplace.measurement import calibration_runs
from tfplace.measurement.local_cluster import make_worker_cluster
from tfplace.models.registry import build_model


@pytest.fixture(scope="module")
def graph():
  return build_model("mlp_towers", num_towers=2, hidden=8, batch_size=4,
                     input_size=8, num_layers=1)


def test_summary_by_hand():
  run = calibration_runs.PredictedRun
  rows = [run("a", 1.1, 1.0), run("b", 1.8, 2.0), run("c", 3.0, 3.0),
          run("d", 1.0, None, "x")]
  med, rho = fidelity.summarize(rows)
  # errors 10 %, 10 %, 0 % -> median 10 %; ranks agree -> rho 1.
  assert med == pytest.approx(0.1)
  assert rho == pytest.approx(1.0)
  assert rows[3].abs_rel_error is None


def test_cross_transfers_and_halves(graph):
  cluster = make_worker_cluster(2)
  zeros = np.zeros(graph.num_ops, dtype=np.int32)
  assert fidelity.cross_transfers(graph, zeros) == 0
  halves = calibration_runs.halves_placement(graph, cluster)
  halves.validate(graph, cluster)
  ids = halves.to_array(graph, cluster)
  assert set(ids.tolist()) == {0, 1}
  producer, _, ptr, consumers = graph.tensors
  expected = sum(len(set(ids[consumers[ptr[t]:ptr[t + 1]]]) - {ids[p]})
                 for t, p in enumerate(producer))
  assert fidelity.cross_transfers(graph, ids) == expected > 0


def test_random_placements_respect_colocation(graph):
  cluster = make_worker_cluster(2)
  placements = calibration_runs.random_group_placements(graph, cluster, 3, seed=1)
  assert len(placements) == 3
  for _, p in placements:
    p.validate(graph, cluster)


def test_markdown_table_lists_rows(graph):
  from tfplace.cost.calibrated import Calibration
  rows = (calibration_runs.PredictedRun("m_etf", 2e-3, 1e-3, num_transfers=7,
                                        uncalibrated_s=4e-3),)
  cal = Calibration(transfer_overhead_s={"CPU": 2e-4}, step_overhead_s=1e-3)
  report = fidelity.FidelityReport("g", 5, rows, cal, 1.0, math.nan)
  text = fidelity_report.markdown_table(report)
  assert "| m_etf | 7 | 2.00 | 4.00 | 1.00 | 100.0 % |" in text
  assert "per transfer CPU 200.0 µs" in text and "step 1.000 ms" in text
  assert "trace excess" not in text
  with_excess = dataclasses.replace(cal, trace_excess_s={"CPU": 1.2e-6})
  assert "trace excess CPU 1.2 µs per op, per transfer" in (
      fidelity_report.describe(with_excess))
  assert "launch-bound" not in text
  launch_bound = dataclasses.replace(
      cal, launch_s={"GPU": {"elementwise": 4e-6, "conv": 2e-5}},
      dispatch_s={"GPU": 2e-6}, stall_s={"GPU": 3.5e-4})
  assert ("GPU launch-bound (elementwise 4.0 µs, conv 20.0 µs, dispatch "
          "2.0 µs per op, stall 350.0 µs per step)") in (
              fidelity_report.describe(launch_bound))


def test_suite_placements_run_each_device_alone_then_split(graph):
  cluster = make_worker_cluster(2)
  placements = calibration_runs.suite_placements(graph, cluster)
  labels = [label for label, _ in placements]
  assert labels == ["on_0", "on_1", "halves", "random"]
  for j in range(2):
    assert set(placements[j][1].devices.values()) == {
        cluster.device_names[j]}
  for _, p in placements[2:]:
    assert len(set(p.devices.values())) == 2
    p.validate(graph, cluster)


def test_without_splits_a_suite_graph_runs_on_each_device_alone(graph):
  cluster = make_worker_cluster(2)
  labels = [label for label, _ in
            calibration_runs.suite_placements(graph, cluster, splits=False)]
  assert labels == ["on_0", "on_1"]


def test_best_check_by_hand():
  run = calibration_runs.PredictedRun
  rows = [run("a", 1.0, 2.1), run("b", 1.5, 2.0), run("c", 3.0, 3.0),
          run("random_0", 0.1, 0.5), run("d", 0.5, None, "failed")]
  # Among measured baselines a, b, c: a is predicted best, b is measured
  # best; a measures 5 % slower than b. Random rows are no baselines.
  regret, predicted, measured = fidelity.best_check(rows, ["a", "b", "c", "d"])
  assert (predicted, measured) == ("a", "b")
  assert regret == pytest.approx(0.05)
  assert math.isnan(fidelity.best_check(rows[:1], ["a"])[0])


def test_cross_matrix_checks_the_targets():
  from tfplace.cost.calibrated import Calibration
  from tfplace.measurement.calibration_runs import CalibrationReport
  from tfplace.measurement.cluster_benchmark import ClusterBenchmark
  good = fidelity.FidelityReport(
      "good", 10, (), Calibration(), 0.10, 0.95,
      uncalibrated_median_abs_rel_error=0.5, uncalibrated_median_ratio=1.5,
      uncalibrated_spearman=0.9, best_regret=0.01, predicted_best="m_etf",
      measured_best="m_etf", uncalibrated_share=0.02)
  bad = dataclasses.replace(good, graph_name="bad", spearman=0.5,
                            uncalibrated_median_ratio=2.5)
  assert all(fidelity_report.targets_met(good).values())
  assert fidelity_report.targets_met(bad) == {
      "error": True, "spearman": False, "best": True, "uncalibrated": False}
  fit = CalibrationReport(("calib_conv",), 5, Calibration(),
                          ClusterBenchmark((), (), 1e-3), (), 0.05, 100)
  text = fidelity_report.cross_matrix(fidelity.CrossReport(fit, (good, bad)))
  assert "| good | 0 | 10.0 % | 0.950 | m_etf (m_etf) | 1.0 % |" in text
  assert "| all |" in text and "not spearman, uncalibrated |" in text
  assert "NOT all met" in text
  assert ("| not probed | - | - | - | - | all |" in text
          and "machine drift:" not in text)
  assert "rounds' spread:" not in text
  data = fidelity_report.cross_json(fidelity.CrossReport(fit, (good,)))
  assert data["graphs"]["good"]["targets_met"]["best"] is True
  assert data["graphs"]["good"]["drift"] is None
  from tfplace.measurement.machine_drift import MachineDrift
  drifted = dataclasses.replace(good, drift=MachineDrift(1.1, 1.2, 1.3, 0.9),
                                drift_adjusted_error=0.08)
  text = fidelity_report.cross_matrix(fidelity.CrossReport(fit, (drifted,)))
  assert ("| compute x1.10, per op x1.20, per message x1.30, empty step "
          "x0.90 | 8.0 % | - | - | - | all |" in text)
  assert "machine drift: time ratios" in text
  data = fidelity_report.cross_json(fidelity.CrossReport(fit, (drifted,)))
  assert data["graphs"]["good"]["drift"] == {
      "compute": 1.1, "per_op": 1.2, "message": 1.3, "empty_step": 0.9}
  assert data["graphs"]["good"][
      "drift_adjusted_median_abs_rel_error"] == 0.08
  assert data["graphs"]["good"]["round_spread"] is None
  repeated = dataclasses.replace(good, round_spread=0.12)
  text = fidelity_report.cross_matrix(fidelity.CrossReport(fit, (repeated,)))
  assert "| not probed | - | 12.0 % | - | - | all |" in text
  assert "rounds' spread: each placement" in text
  leveled = dataclasses.replace(good, level=0.8, level_free_error=0.05)
  text = fidelity_report.cross_matrix(fidelity.CrossReport(fit, (leveled,)))
  assert "| not probed | - | - | 0.80 | 5.0 % | all |" in text
  assert "error beside the level: the median abs error" in text
  data = fidelity_report.cross_json(fidelity.CrossReport(fit, (leveled,)))
  assert data["graphs"]["good"]["level"] == 0.8
  assert data["graphs"]["good"]["level_free_median_abs_rel_error"] == 0.05
  data = fidelity_report.cross_json(fidelity.CrossReport(fit, (repeated,)))
  assert data["graphs"]["good"]["round_spread"] == 0.12


def test_level_and_the_error_beside_it_by_hand():
  run = calibration_runs.PredictedRun
  # Ratios 0.8, 0.88, 0.8 / 1.1 and 0.64 (a failed run does not count):
  # level = their median, (0.8 / 1.1 + 0.8) / 2 = 0.7636; divided by it,
  # 1.0476, 1.1524, 0.9524 and 0.8381: errors 0.048, 0.152, 0.048, 0.162,
  # whose median is 0.10.
  rows = [run("a", 0.8, 1.0), run("b", 0.88, 1.0), run("c", 0.8, 1.1),
          run("d", 0.64, 1.0), run("e", 1.0, None, "failed")]
  level, rest = fidelity.level_and_rest(rows)
  assert level == pytest.approx(0.76364, abs=1e-5)
  assert rest == pytest.approx(0.10)
  # All predicted at half the measured steps: a level, no error beside it.
  halves = [run("a", 0.5, 1.0), run("b", 1.0, 2.0), run("c", 2.0, 4.0)]
  assert fidelity.level_and_rest(halves) == (0.5, 0.0)
  assert all(math.isnan(x) for x in fidelity.level_and_rest(rows[4:]))


def test_round_spread_by_hand():
  from tfplace.measurement.batch import MeasureOutcome
  from tfplace.measurement.timing import timing_from_steps

  def outcome(*rounds):
    return MeasureOutcome("k", timing_from_steps([min(rounds)]),
                          round_step_times_s=rounds)

  # Spreads 0.5, 0.1 and 0.2 (the third: slowest 1.2 / fastest 1.0); a
  # one-round and a failed outcome do not count.
  outcomes = [outcome(2.0, 3.0), outcome(1.1, 1.0), outcome(1.0, 1.2, 1.1),
              outcome(5.0), MeasureOutcome("k", None, "failed")]
  assert fidelity.round_spread(outcomes) == pytest.approx(0.2)
  assert math.isnan(fidelity.round_spread(outcomes[3:]))


def test_interleave_spreads_the_short_list():
  # a = [0, 1], b = [2, 3, 4, 5]: fractions a 0.25, 0.75; b .125 .375 .625 .875
  assert fidelity.interleave(2, 4) == [2, 0, 3, 4, 1, 5]
  assert fidelity.interleave(0, 2) == [0, 1]
  assert sorted(fidelity.interleave(3, 7)) == list(range(10))


def test_records_summary_counts_targets_over_records():
  from tfplace.cost.calibrated import Calibration
  from tfplace.measurement.calibration_runs import CalibrationReport
  from tfplace.measurement.cluster_benchmark import ClusterBenchmark
  run = calibration_runs.PredictedRun
  # Predicted 1.1x and 1/1.1x the measured: |log| = log 1.1 each.
  good = fidelity.FidelityReport(
      "g", 10, (run("a", 1.1, 1.0), run("b", 1.0, 1.1)), Calibration(),
      0.10, 0.95, uncalibrated_median_ratio=1.5, best_regret=0.0,
      level_free_error=0.15)
  bad = dataclasses.replace(good, median_abs_rel_error=0.30, spearman=0.5,
                            round_spread=0.25, level_free_error=0.16)
  fit = CalibrationReport((), 0, Calibration(),
                          ClusterBenchmark((), (), 1e-3), (), 0.05, 1)
  text = fidelity_report.records_summary([
      ("r1", fidelity.CrossReport(fit, (good,))),
      ("r2", fidelity.CrossReport(fit, (bad,)))])
  assert ("| r1 | 1/1 | 1/1 | 1/1 | 1/1 | 10.0 % | not probed | 1/1 | - |"
          in text)
  assert ("| r2 | 0/1 | 0/1 | 1/1 | 1/1 | 30.0 % | not probed | 0/1 | 25.0 % |"
          in text)
  assert "| all | 1/2 | 1/2 | 2/2 | 2/2 | | 0/0 | 1/2 | |" in text
  assert f"median |log(predicted / measured)| {math.log(1.1):.3f}" in text
  assert "mean log +0.000" in text
  assert "g 20.0 %" in text
  text = fidelity_report.placements_summary([
      ("r1", fidelity.CrossReport(fit, (good,))),
      ("r2", fidelity.CrossReport(fit, (bad,)))])
  assert "| g | a | 0 | 2 | 1.10 | 1.10-1.10 | 1000.00 ms |" in text
  assert "| g | b | 0 | 2 | 0.91 | 0.91-0.91 | 1100.00 ms |" in text
