"""Warnings of placers that are only tried, kept to one line.

`init=best_heuristic` runs every heuristic placer and keeps the fastest
placement; most of the others are thrown away. On a cluster where memory is
tight, Baechi's placers each warned that a colocation group "fits on no
device" at every activation share they tried: ~15 warnings about placements
nobody asked for and none of which was kept. `collect_warnings` keeps the
absl warnings logged inside it off the log and hands them to the caller,
which logs them at DEBUG (`--verbosity 1`) and sums them up in one INFO
line (`log_collected`).
"""

import contextlib
import logging as std_logging
from typing import Dict, Iterator, List

from absl import logging


class _Collector(std_logging.Filter):
  """Drops WARNING records of the absl logger, keeping their text."""

  def __init__(self):
    super().__init__()
    self.messages: List[str] = []

  def filter(self, record: std_logging.LogRecord) -> bool:
    if record.levelno != std_logging.WARNING:
      return True
    self.messages.append(record.getMessage())
    return False


@contextlib.contextmanager
def collect_warnings() -> Iterator[List[str]]:
  """Yields the list the absl warnings logged inside are put in (instead of
  the log)."""
  logger = logging.get_absl_logger()
  collector = _Collector()
  logger.addFilter(collector)
  try:
    yield collector.messages
  finally:
    logger.removeFilter(collector)


def log_collected(what: str, warnings: Dict[str, List[str]]) -> None:
  """Logs `warnings` (placer name -> its collected warnings) at DEBUG, and
  one INFO line that counts them (nothing if there are none)."""
  counts = {name: len(w) for name, w in warnings.items() if w}
  if not counts:
    return
  for name, messages in warnings.items():
    for message in messages:
      logging.debug("%s: %s", name, message)
  first = next(w[0] for w in warnings.values() if w)
  logging.info(
      "%s: %d warnings kept off the log (%s), e.g. %r; --verbosity 1 shows "
      "them", what, sum(counts.values()),
      ", ".join(f"{n} {c}" for n, c in sorted(counts.items())), first)
