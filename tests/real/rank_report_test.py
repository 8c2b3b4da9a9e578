"""The verification report: worked by hand from made-up round medians."""

import math

import numpy as np
import pytest

from tfplace.real.interleaved import InterleavedTimes, round_order
from tfplace.real.rank_report import (VerifyReport, build_report,
                                      rank_agreement, with_duel)


def _times(rows, errors=None, stopped=None):
  rows = np.array(rows, dtype=float)
  errors = errors or [()] * len(rows)
  return InterleavedTimes(rows, tuple(tuple(e) for e in errors), stopped)


def test_the_fastest_relative_to_the_heuristic_is_chosen_despite_drift():
  # Round 2 runs everything 2x slower (drift): ratios within rounds cancel it.
  times = _times([[10.0, 20.0],      # #1: 1.25x the heuristic
                  [6.0, 12.0],       # #2: 0.75x: the fastest
                  [8.0, 16.0]])      # the heuristic
  report = build_report(["s #1", "s #2", "heuristic"], [1.0, 2.0, 3.0], times,
                        reference=2, rounds=2, target="here")
  assert report.chosen == 1
  assert report.candidates[1].ratio == pytest.approx(0.75)
  assert report.candidates[1].measured_s == pytest.approx(9.0)
  assert report.speedup_over_heuristic == pytest.approx(1 / 0.75)
  assert report.predicted_best_is_measured_best is False  # #1 was predicted
  assert report.spearman == pytest.approx(-0.5)  # ranks 1,2,3 vs 2,1,3
  text = report.describe()
  assert "* s #2" in text and "1.333x" in text and "Spearman -0.500" in text


def test_a_failed_sample_is_named_and_the_rest_still_rank():
  times = _times([[np.nan, np.nan], [5.0, 5.0], [10.0, np.nan]],
                 errors=[("worker task 1 died", "worker task 1 died"), (),
                         ("timeout",)], stopped="worker task 1 died")
  report = build_report(["a", "b", "ref"], [1.0, 2.0, 3.0], times, 2, 2, "t")
  assert report.chosen == 1 and report.candidates[0].measured_s is None
  assert report.candidates[0].rounds_ok == 0
  assert report.candidates[2].rounds_ok == 1
  assert report.speedup_over_heuristic == pytest.approx(2.0)
  assert "failed: worker task 1 died" in report.describe()
  assert "stopped early" in report.describe()
  again = VerifyReport.from_dict(report.to_dict())
  assert again == report


def test_nothing_measured_returns_the_simulators_pick():
  times = _times([[np.nan], [np.nan]], errors=[("x",), ("y",)])
  report = build_report(["a", "ref"], [1.0, 2.0], times, 1, 1, "t")
  assert report.chosen == 0 and report.speedup_over_heuristic is None
  assert report.spearman is None and report.predicted_best_is_measured_best is None


def test_one_placement_is_one_placement():
  # A one-device cluster has one distinct placement: "verified 1 placements".
  report = build_report(["ref"], [1.0], _times([[2.0]]), 0, 1, "this process")
  assert report.describe().startswith(
      "verified 1 placement on this process, 1 interleaved round:")


def test_rank_agreement_needs_three_points_for_spearman():
  assert rank_agreement(np.array([1.0, 2.0]), np.array([2.0, 1.0])) == (None,
                                                                       False)
  rho, same = rank_agreement(np.array([1.0, 2.0, 3.0, math.inf]),
                             np.array([1.0, 3.0, 2.0, 0.5]))
  assert rho == pytest.approx(0.5) and same


def test_rounds_rotate_and_reverse():
  assert [round_order(3, r) for r in range(4)] == [
      [0, 1, 2], [0, 2, 1], [2, 0, 1], [2, 1, 0]]


@pytest.mark.parametrize("duel, chosen, speedup", [
    ([[9.0, 8.0], [10.0, 10.0]], 1, 1 / 0.85),   # faster again: kept
    ([[11.0, 10.0], [10.0, 10.0]], 2, 1.0),      # lucky in the rounds
    ([[np.nan, np.nan], [10.0, 10.0]], 2, 1.0),  # the duel failed
])
def test_the_rounds_winner_must_win_a_fresh_duel(duel, chosen, speedup):
  times = _times([[10.0, 20.0], [6.0, 12.0], [8.0, 16.0]])
  report = build_report(["s #1", "s #2", "heuristic"], [1.0, 2.0, 3.0], times,
                        reference=2, rounds=2, target="here")
  dueled = with_duel(report, _times(duel))
  assert dueled.duel_candidate == 1 and dueled.chosen == chosen
  assert dueled.speedup_over_heuristic == pytest.approx(speedup)
  assert "duel: s #2" in dueled.describe()
