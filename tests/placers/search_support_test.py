"""Budget, best-so-far and Ctrl-C of the shared search loop."""

import math
import os
import signal

import numpy as np
import pytest

from tfplace import interrupts
from tfplace.errors import PlacementError
from tfplace.placers.search_support import (Budget, SearchPoint,
                                            SearchResult, SearchRun,
                                            TopPlacements, budget_from_options,
                                            chain_results)


def _sum_of_devices(candidates):
  """Step time = sum of device ids; device 3 is 'out of memory' (inf)."""
  times = candidates.sum(axis=1).astype(float)
  times[(candidates == 3).any(axis=1)] = math.inf
  return times


@pytest.mark.parametrize("seconds", [0, -1, float("nan"), float("inf")])
def test_a_budget_of_zero_or_negative_seconds_is_a_clear_error(seconds):
  with pytest.raises(PlacementError, match="positive number of seconds"):
    Budget(seconds=seconds)


def test_a_budget_needs_a_limit_and_positive_evaluations():
  with pytest.raises(PlacementError, match="needs seconds or evaluations"):
    Budget(seconds=None)
  with pytest.raises(PlacementError, match="positive number of evaluations"):
    Budget(seconds=None, evaluations=0)
  with pytest.raises(PlacementError, match="max_evaluations must be >= 0"):
    budget_from_options(10.0, -5)
  assert budget_from_options(10.0, 0) == Budget(10.0, None)


def test_best_so_far_keeps_only_feasible_improvements():
  start = np.array([2, 2])
  with SearchRun(_sum_of_devices, Budget(seconds=None, evaluations=7), start,
                 progress=False) as run:
    assert run.best_step_time_s == 4.0 and run.evaluations == 1
    run.evaluate(np.array([[3, 0], [2, 1]]))  # inf is never the best.
    assert run.best_step_time_s == 3.0
    assert run.best_devices.tolist() == [2, 1]
    run.evaluate(np.array([[2, 2], [1, 1]]))
    assert run.batch_size(64) == 2 and not run.done()
    run.evaluate(np.array([[0, 3], [0, 1]]))
    assert run.done()
  result = run.result(note="x")
  assert result.step_time_s == 1.0 and result.group_devices.tolist() == [0, 1]
  assert result.start_step_time_s == 4.0 and result.evaluations == 7
  assert [p.best_step_time_s for p in result.history] == [4.0, 3.0, 2.0, 1.0]
  assert [p.evaluations for p in result.history] == [1, 3, 5, 7]
  assert result.extra == {"note": "x"} and not result.interrupted


def test_an_infeasible_start_is_never_reported_as_best():
  with SearchRun(_sum_of_devices, Budget(evaluations=3), np.array([3, 0]),
                 progress=False) as run:
    run.evaluate(np.array([[3, 3]]))
  result = run.result()
  assert math.isinf(result.step_time_s)
  assert result.group_devices.tolist() == [3, 0]


def test_ctrl_c_stops_the_search_and_keeps_the_best():
  # The handler before the run (SIG_IGN where the tests run in a background
  # job of a non-interactive shell) is the one restored after it.
  before = signal.getsignal(signal.SIGINT)
  try:
    with SearchRun(_sum_of_devices, Budget(seconds=60), np.array([2, 2]),
                   progress=False) as run:
      steps = 0
      while not run.done():
        run.evaluate(np.array([[1, 2 - min(steps, 2)]]))
        steps += 1
        if steps == 3:
          os.kill(os.getpid(), signal.SIGINT)
  finally:
    interrupts.clear()  # The run noted it; later tests in this process write.
  result = run.result()
  assert result.interrupted and steps == 3
  assert result.step_time_s == 1.0
  assert signal.getsignal(signal.SIGINT) is before


def test_the_run_keeps_the_k_best_distinct_feasible_placements():
  with SearchRun(_sum_of_devices, Budget(evaluations=100), np.array([2, 2]),
                 progress=False, keep_top=3) as run:
    run.evaluate(np.array([[2, 2], [1, 2], [2, 1], [3, 0]]))  # repeat, inf
    run.evaluate(np.array([[1, 2], [0, 2], [2, 2], [1, 1]]))
  top = run.result().top
  # [1, 2] and [2, 1] tie at 3, [0, 2] and [1, 1] at 2: the first kept.
  assert [(d.tolist(), t) for d, t in top] == [([0, 2], 2.0), ([1, 2], 3.0),
                                               ([2, 2], 4.0)]


def test_top_placements_drop_the_slowest_and_ignore_ties():
  top = TopPlacements(2)
  top.offer(np.array([[1, 1], [2, 2]]), np.array([5.0, 4.0]))
  top.offer(np.array([[2, 0], [0, 1]]), np.array([4.0, 4.5]))
  assert [(d.tolist(), t) for d, t in top.best()] == [([2, 2], 4.0),
                                                      ([0, 1], 4.5)]
  top.offer(np.array([[0, 0], [1, 0]]), np.array([math.inf, 1.0]))
  assert [t for _, t in top.best()] == [1.0, 4.0]
  assert TopPlacements(0).best() == ()


def test_an_evaluator_can_stop_the_search_and_the_best_is_kept():
  from tfplace.placers.search_support import StopSearch
  calls = []

  def evaluate(candidates):
    calls.append(len(candidates))
    if len(calls) == 3:
      raise StopSearch("worker task 1 died")
    return _sum_of_devices(candidates)

  with SearchRun(evaluate, Budget(seconds=60), np.array([2, 2]),
                 progress=False) as run:
    while not run.done():
      run.evaluate(np.array([[1, 2 - len(calls)]]))
  result = run.result()
  assert result.stop_reason == "worker task 1 died" and len(calls) == 3
  assert result.step_time_s == 2.0 and result.group_devices.tolist() == [1, 1]
  assert result.summary()["stop_reason"] == "worker task 1 died"


def test_a_budget_shares_and_what_is_left():
  budget = Budget(seconds=60.0, evaluations=1000)
  assert budget.share(0.4) == Budget(seconds=24.0, evaluations=400)
  assert Budget(seconds=None, evaluations=2).share(0.1).evaluations == 1
  spent = _result(np.zeros(2, np.int32), 1.0, evaluations=400, seconds=20.0)
  assert budget.left_after(spent) == Budget(seconds=40.0, evaluations=600)
  assert Budget(seconds=10.0).left_after(spent) is None
  assert Budget(seconds=None, evaluations=400).left_after(spent) is None


def _result(devices, step, evaluations=10, seconds=1.0, history=(), top=(),
            start=None):
  return SearchResult(np.asarray(devices, np.int32), step,
                      step if start is None else start, evaluations, seconds,
                      tuple(history), top=tuple(top))


def test_two_searches_in_a_row_are_one_result():
  to_second = np.array([0, 0, 1], np.int32)  # 3 fine groups of 2 coarse
  first = _result([1, 0], 3.0, evaluations=10, seconds=2.0, start=4.0,
                  history=[SearchPoint(1, 0.0, 4.0), SearchPoint(5, 1.0, 3.0)],
                  top=[(np.array([1, 0], np.int32), 3.0),
                       (np.array([0, 0], np.int32), 4.0)])
  second = _result([1, 0, 0], 2.5, evaluations=20, seconds=3.0, start=3.0,
                   history=[SearchPoint(1, 0.0, 3.0), SearchPoint(8, 2.0, 2.5)],
                   top=[(np.array([1, 0, 0], np.int32), 2.5),
                        (np.array([1, 1, 0], np.int32), 3.0)])
  both = chain_results(first, second, to_second, stages=2)
  assert both.group_devices.tolist() == [1, 0, 0] and both.step_time_s == 2.5
  assert both.start_step_time_s == 4.0
  assert (both.evaluations, both.seconds) == (30, 5.0)
  assert [(p.evaluations, p.seconds, p.best_step_time_s)
          for p in both.history] == [(1, 0.0, 4.0), (5, 1.0, 3.0),
                                     (18, 4.0, 2.5)]
  assert [(d.tolist(), t) for d, t in both.top] == [
      ([1, 0, 0], 2.5), ([1, 1, 0], 3.0), ([0, 0, 0], 4.0)]
  assert both.extra["stages"] == 2


def test_a_second_search_that_finds_nothing_keeps_the_first_best():
  first = _result([1, 0], 3.0, start=4.0)
  second = _result([1, 1, 0], math.inf, start=3.0)
  both = chain_results(first, second, np.array([0, 0, 1], np.int32))
  assert both.group_devices.tolist() == [1, 1, 0] and both.step_time_s == 3.0
