"""How much slower an op runs in a multi-device step than alone, by how long
its worker sat idle before it (issue 13; `scripts/idle_slowdown.py`).

Each op of a multi-device run (its traced `OpRecord`) is paired with the
same op in a one-device run of the same graph (on the same device when
there is one); the idle gap is the time from the end of the worker's
previous ops to the op's start. On one-core TF server workers the ratio
grows with the gap (WORKSPACE_NOTES.md, issue 13, 2026-11-27). The
calibration leaves multi-device op records out of its fit for this reason.
"""

import dataclasses
from collections import defaultdict
from typing import Dict, Iterable, Iterator, List, Tuple

import numpy as np

from tfplace.measurement.calibration_runs import GraphRuns

# Gap buckets: [0, 20 us), [20 us, 100 us), [100 us, inf).
GAP_EDGES_S = (20e-6, 100e-6)
BUCKETS = ("< 20 us", "20-100 us", ">= 100 us")


@dataclasses.dataclass(frozen=True)
class SlowdownRow:
  """One graph (or "all") and gap bucket.

  Attributes:
    graph: the graph's label, or "all".
    bucket: one of BUCKETS.
    num_ops: op pairs in the bucket.
    median_ratio: median of multi-device / one-device op duration.
    median_excess_s, mean_excess_s: the difference of the two durations.
  """
  graph: str
  bucket: str
  num_ops: int
  median_ratio: float
  median_excess_s: float
  mean_excess_s: float


def op_pairs(runs: GraphRuns, min_base_s: float = 5e-6
             ) -> Iterator[Tuple[float, float, float]]:
  """(idle gap, multi-device duration, one-device duration) per op of each
  multi-device run of `runs` that a one-device run also traced for at
  least `min_base_s`; the first op of each worker has no gap and is left
  out."""
  alone: Dict[Tuple[str, str], float] = {}
  anywhere: Dict[str, float] = {}
  split = []
  for (_, placement), outcome in zip(runs.placements, runs.outcomes):
    if not outcome.ok:
      continue
    if len(set(placement.devices.values())) > 1:
      split.append(outcome.timing.op_records)
      continue
    for r in outcome.timing.op_records:
      alone[(r.device, r.name)] = r.duration_s
      anywhere.setdefault(r.name, r.duration_s)
  for records in split:
    by_device = defaultdict(list)
    for r in records:
      by_device[r.device].append(r)
    for device, ops in by_device.items():
      ops.sort(key=lambda r: r.start_s)
      busy_until = None
      for r in ops:
        base = alone.get((device, r.name), anywhere.get(r.name))
        if busy_until is not None and base is not None and base >= min_base_s:
          yield r.start_s - busy_until, r.duration_s, base
        end = r.start_s + r.duration_s
        busy_until = end if busy_until is None else max(busy_until, end)


def slowdown_table(graph_runs: Iterable[GraphRuns],
                   min_base_s: float = 5e-6) -> List[SlowdownRow]:
  """Rows per graph label and gap bucket, then "all" (empty buckets
  left out)."""
  pairs = defaultdict(list)
  for runs in graph_runs:
    for gap, dur, base in op_pairs(runs, min_base_s):
      bucket = BUCKETS[int(np.searchsorted(GAP_EDGES_S, gap, side="right"))]
      pairs[(runs.label, bucket)].append((dur, base))
      pairs[("all", bucket)].append((dur, base))
  labels = sorted({label for label, _ in pairs} - {"all"}) + ["all"]
  rows = []
  for label in labels:
    for bucket in BUCKETS:
      got = np.array(pairs.get((label, bucket), []), dtype=float)
      if not len(got):
        continue
      excess = got[:, 0] - got[:, 1]
      rows.append(SlowdownRow(label, bucket, len(got),
                              float(np.median(got[:, 0] / got[:, 1])),
                              float(np.median(excess)),
                              float(np.mean(excess))))
  return rows
