"""Warnings of placers that are only tried, kept to one line."""

import logging as std_logging

import search_testlib as lib
from absl import logging

from tfplace.placers.quiet_trials import collect_warnings, log_collected
from tfplace.placers.registry import get_placer
from tfplace.placers.search_support import start_placement

NO_DEVICE = "fits on no device"


def test_warnings_inside_are_collected_and_the_rest_pass(caplog):
  with caplog.at_level(std_logging.INFO, logger="absl"):
    with collect_warnings() as warned:
      logging.warning("group %d fits on no device", 3)
      logging.info("an info line")
    logging.warning("after the block")
  assert warned == ["group 3 fits on no device"]
  assert [r.getMessage() for r in caplog.records] == ["an info line",
                                                      "after the block"]


def test_log_collected_is_one_info_line_or_nothing(caplog):
  with caplog.at_level(std_logging.INFO, logger="absl"):
    log_collected("trying", {"a": [], "b": []})
    assert not caplog.records
    log_collected("trying", {"m_etf": ["x fits on no device", "y"],
                             "m_sct": ["z"], "random": []})
  assert [r.getMessage() for r in caplog.records] == [
      "trying: 3 warnings kept off the log (m_etf 2, m_sct 1), e.g. "
      "'x fits on no device'; --verbosity 1 shows them"]


def test_best_heuristic_start_on_a_tight_cluster_warns_not(caplog):
  # 3 kB a device: Baechi's placers warned that a group fits on no device
  # at share 1 (9 warnings here, ~15 on a user's cluster), though their
  # placements were only tried as starts and the start is another's.
  problem = lib.chain_problem(memory_bytes=3000)
  with caplog.at_level(std_logging.INFO, logger="absl"):
    start = start_placement(problem, "best_heuristic", seed=0)
  assert start.source == "expert (best of 11 heuristics)"
  warnings = [r for r in caplog.records if r.levelno >= std_logging.WARNING]
  assert not warnings, [r.getMessage() for r in warnings]
  summary = [r.getMessage() for r in caplog.records
             if "kept off the log" in r.getMessage()]
  assert len(summary) == 1 and NO_DEVICE in summary[0]
  assert "m_etf" in summary[0]
  caplog.clear()
  # Asked for: it still warns.
  with caplog.at_level(std_logging.WARNING, logger="absl"):
    get_placer("m_etf").place(problem)
  assert NO_DEVICE in caplog.text
