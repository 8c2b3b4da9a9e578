"""Simulated against measured peak memory per device
(`scripts/memory_fidelity.py`).

The simulator decides which placements fit (`tfplace.simulator.simulator`:
parameters and constants are resident all step; an op's outputs live from its
start until its last local consumer and its transfers end; a received copy
lives on the destination until its last consumer there ends). This checks that
model against TensorFlow's allocators: each placement is measured on real
devices and each device's peak (`StepTiming.peak_memory_bytes`, the most bytes
its allocator held during the traced step) is set against the simulated peak
of the same device. A ratio (measured / simulated) above 1 is the direction
that matters: the simulator said the placement fits with less than it took.
"""

import dataclasses
from typing import List, Sequence, Tuple

import numpy as np

from tfplace.cost.cluster import Cluster
from tfplace.graph.op_graph import OpGraph
from tfplace.measurement.batch import MeasureOutcome
from tfplace.placement import Placement
from tfplace.simulator.result import SimResult

# A device whose measured peak is this much over the simulated one counts as
# under-predicted in the summary.
UNDER_PREDICTED_RATIO = 1.1


@dataclasses.dataclass(frozen=True)
class MemoryRow:
  """One device of one measured placement.

  Attributes:
    graph: the graph's name.
    placement: the placement's label (its placer).
    device: the device's full name.
    simulated_bytes: the simulator's peak on the device.
    measured_bytes: its allocator's peak in the traced step.
  """
  graph: str
  placement: str
  device: str
  simulated_bytes: int
  measured_bytes: int

  @property
  def ratio(self) -> float:
    """measured / simulated (inf where the simulator saw nothing)."""
    if self.simulated_bytes <= 0:
      return float("inf")
    return self.measured_bytes / self.simulated_bytes


@dataclasses.dataclass(frozen=True)
class MemorySummary:
  """The rows' ratios in a few numbers.

  Attributes:
    num_devices: rows with a measured and a simulated peak.
    median_ratio, min_ratio, max_ratio: of measured / simulated.
    under_predicted: rows whose ratio is over `UNDER_PREDICTED_RATIO`.
  """
  num_devices: int
  median_ratio: float
  min_ratio: float
  max_ratio: float
  under_predicted: int


def memory_rows(graph: OpGraph, cluster: Cluster,
                labelled: Sequence[Tuple[str, Placement]],
                results: Sequence[SimResult],
                outcomes: Sequence[MeasureOutcome]) -> List[MemoryRow]:
  """A row per device that a placement used or that measured a peak.

  Args:
    graph: the graph the placements place.
    cluster: the cluster they were simulated on (its device names are the
      measured ones).
    labelled: (label, placement) pairs.
    results: the simulated result of each placement.
    outcomes: the measured outcome of each placement; a failed one, or one
      whose allocators kept no statistics, gives no rows.
  """
  rows = []
  for (label, _), result, outcome in zip(labelled, results, outcomes):
    if not outcome.ok or not outcome.timing.peak_memory_bytes:
      continue
    measured = outcome.timing.peak_memory_bytes
    for d, name in enumerate(cluster.device_names):
      simulated = int(result.peak_memory_bytes[d])
      if simulated > 0 or name in measured:
        rows.append(MemoryRow(graph.name, label, name, simulated,
                              int(measured.get(name, 0))))
  return rows


def summarize(rows: Sequence[MemoryRow]) -> MemorySummary:
  """The ratios of the rows with both peaks."""
  ratios = np.array([r.ratio for r in rows
                     if r.simulated_bytes > 0 and r.measured_bytes > 0])
  if ratios.size == 0:
    return MemorySummary(0, float("nan"), float("nan"), float("nan"), 0)
  return MemorySummary(
      num_devices=int(ratios.size), median_ratio=float(np.median(ratios)),
      min_ratio=float(ratios.min()), max_ratio=float(ratios.max()),
      under_predicted=int(np.sum(ratios > UNDER_PREDICTED_RATIO)))
