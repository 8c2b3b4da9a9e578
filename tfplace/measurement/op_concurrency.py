"""How many ops ran beside each traced op, and what that op would take alone.

On a multi-core CPU device TF's executor runs ready ops at once, and every
op wider than a thread's share of work splits over one intra-op pool: a
convolution traced while three other ops ran took longer than it takes
alone. The calibration suite's graphs run several branches at once, so
their traced convolutions carry that contention, and the simulator, which
runs ops in the device's slots each at its own cost, overlapped them again:
on the nine recorded cross runs with multi-core CPUs (a 16-core in-process
CPU and 4-core server workers beside an H200; WORKSPACE_NOTES.md, issue 13)
the CNNs' single_cpu steps were predicted 1.28-1.60x their measured time,
and a suite's Conv2D traced 1.5x the same shape in a judged graph.

`solo_durations` divides each wide op's traced duration by the square
root of its concurrency: the time-average count of ops running on its
device over its interval, itself included. An op whose neighbours are
narrow (one thread each) loses little of the pool, one beside other wide
ops up to its even share: the square root sits between (replayed on those
nine records, the exponent 0.4-0.6 met the error target on 38-41 of 63
graph-runs against 34, Spearman 40-41 against 38, best 52-53 against 53;
1.0 lost 6-8 best cells). Narrow ops (under `WIDE_OP_S`, about Eigen's
100,000 cycles below which an op runs on one thread) are left as traced.
On one-core workers nothing overlaps and nothing changes.
"""

from typing import Dict, Sequence

import numpy as np

from tfplace.measurement.timing import OpRecord

# Traced seconds under which an op runs on one thread (Eigen's cost model
# splits work of ~100,000 cycles or more; 40 us at 2.5 GHz).
WIDE_OP_S = 40e-6
# The power of an op's concurrency its traced duration is divided by.
SHARE_EXPONENT = 0.5


def concurrency(records: Sequence[OpRecord]) -> np.ndarray:
  """Per record, the time-average number of records of its device running
  over its interval, itself included (1 for a zero-length record)."""
  out = np.ones(len(records))
  by_device: Dict[str, list] = {}
  for k, r in enumerate(records):
    by_device.setdefault(r.device, []).append(k)
  for ks in by_device.values():
    start = np.array([records[k].start_s for k in ks])
    length = np.array([records[k].duration_s for k in ks])
    end = start + length
    times = np.concatenate([start, end])
    steps = np.concatenate([np.ones(len(ks)), -np.ones(len(ks))])
    order = np.argsort(times, kind="stable")
    times, running = times[order], np.cumsum(steps[order])
    # The integral of the running count up to each event time.
    area = np.concatenate([[0.0], np.cumsum(running[:-1] * np.diff(times))])
    covered = np.interp(end, times, area) - np.interp(start, times, area)
    positive = length > 0
    out[np.array(ks)[positive]] = np.maximum(
        1.0, covered[positive] / length[positive])
  return out


def solo_durations(records: Sequence[OpRecord]) -> np.ndarray:
  """Per record, its traced duration as if it had run alone: a wide op's
  (over `WIDE_OP_S`) divided by its `concurrency` to `SHARE_EXPONENT`,
  a narrow op's as traced."""
  durations = np.array([r.duration_s for r in records], dtype=float)
  if not len(records):
    return durations
  wide = durations > WIDE_OP_S
  factor = np.where(wide, concurrency(records) ** SHARE_EXPONENT, 1.0)
  return durations / factor
