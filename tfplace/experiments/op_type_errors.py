"""Where a calibration's op costs miss a graph it never saw, per op type.

A judged graph's one-device run keeps every op's traced duration. Summed
per op type and `Op.variant`, the traced time as the op-type fit reads it
(`calibration_fit.traced_op_times`: as if alone, less the tracer's cost
per op) stands beside what the calibrated cost model charges the same ops
in the same terms (`CalibratedCostModel`'s cost without the trace excess
it takes off, less the launch overhead: a fitted type's curve). The types
that carry a one-device step's error then show, largest first:
resnet_like's filter gradients, charged 1.75x their traced time, were
found this way (WORKSPACE_NOTES.md, issue 13). Launch-bound devices (GPUs
with measured launches) are left out: their costs are not in these terms.
`scripts/fidelity.py --replay FILES --op_types N` prints the table.
"""

import collections
import dataclasses
import statistics
from typing import Dict, List, Mapping, Sequence, Tuple

from tfplace.cost.calibrated import (Calibration, CalibratedCostModel,
                                     apply_calibration)
from tfplace.cost.cluster import Cluster
from tfplace.graph.op_graph import OpGraph
from tfplace.measurement.batch import MeasureOutcome
from tfplace.measurement.calibration_fit import traced_op_times
from tfplace.measurement.timing import StepTiming
from tfplace.placement import Placement


@dataclasses.dataclass(frozen=True)
class OpTypeError:
  """One op type's ops in one traced step.

  Attributes:
    op_type: the TF op type.
    variant: their `Op.variant` ("" for plain ops).
    ops: traced executions.
    traced_s: their traced seconds, summed (as the op-type fit reads them).
    predicted_s: the calibrated costs of the same executions, summed, in
      the same terms.
  """
  op_type: str
  variant: str
  ops: int
  traced_s: float
  predicted_s: float


def op_type_errors(graph: OpGraph, cluster: Cluster, calibration: Calibration,
                   timing: StepTiming, traced_op_s: Mapping[str, float]
                   ) -> Tuple[OpTypeError, ...]:
  """The traced step `timing` of `graph` on `cluster` (uncalibrated) per op
  type and variant, beside `calibration`'s costs, largest |traced -
  predicted| first; `traced_op_s`: device name -> the tracer's cost per
  op (`DeviceBenchmark.traced_op_s`)."""
  calibrated = apply_calibration(cluster, calibration)
  # Without the trace excess (the fit's own terms): an op then costs its
  # launch plus its fitted (or analytical) time.
  untrimmed = dataclasses.replace(calibration, trace_excess_s={})
  seconds = CalibratedCostModel(untrimmed).op_costs(graph,
                                                    calibrated).compute_s
  skip = {j for j, d in enumerate(calibrated.devices)
          if d.type in calibration.launch_s}
  traced: Dict[Tuple[str, str], float] = collections.defaultdict(float)
  predicted: Dict[Tuple[str, str], float] = collections.defaultdict(float)
  ops: Dict[Tuple[str, str], int] = collections.Counter()
  for i, j, measured in traced_op_times(graph, calibrated, timing,
                                        traced_op_s):
    if j in skip:
      continue
    device = calibrated.devices[j]
    op = graph.ops[i]
    key = (op.type, op.variant)
    traced[key] += measured
    predicted[key] += max(0.0, seconds[i, j] - device.launch_overhead_s)
    ops[key] += 1
  rows = [OpTypeError(t, v, ops[(t, v)], traced[(t, v)], predicted[(t, v)])
          for t, v in traced]
  return tuple(sorted(rows, key=lambda r: -abs(r.traced_s - r.predicted_s)))


def one_device_errors(graph: OpGraph, cluster: Cluster,
                      calibration: Calibration,
                      placements: Sequence[Tuple[str, Placement]],
                      outcomes: Sequence[MeasureOutcome],
                      traced_op_s: Mapping[str, float]
                      ) -> List[Tuple[OpTypeError, ...]]:
  """`op_type_errors` of each measured run whose placement uses one
  device (its ops' whole cost is compute: no message in it)."""
  out = []
  for (_, placement), outcome in zip(placements, outcomes):
    if (not outcome.ok or not outcome.timing.op_records
        or len(set(placement.devices.values())) != 1):
      continue
    out.append(op_type_errors(graph, cluster, calibration, outcome.timing,
                              traced_op_s))
  return out


def summary_table(runs_by_graph: Mapping[str, Sequence[Tuple[OpTypeError,
                                                               ...]]],
                  top: int) -> str:
  """A markdown table: per graph, its `top` op types by |median traced -
  median predicted| over the runs given (the medians of each type's sums
  over the runs where it ran)."""
  lines = ["| graph | op type | variant | ops | traced ms | predicted ms | "
           "predicted / traced | runs |", "|---|---|---|---:|---:|---:|---:|"
           "---:|"]
  for name, runs in runs_by_graph.items():
    by_key = collections.defaultdict(list)
    for rows in runs:
      for r in rows:
        by_key[(r.op_type, r.variant)].append(r)
    medians = []
    for (op_type, variant), rows in by_key.items():
      traced = statistics.median(r.traced_s for r in rows)
      predicted = statistics.median(r.predicted_s for r in rows)
      medians.append((abs(traced - predicted), op_type, variant,
                      statistics.median(r.ops for r in rows), traced,
                      predicted, len(rows)))
    for _, op_type, variant, count, traced, predicted, n in sorted(
        medians, reverse=True)[:top]:
      ratio = f"{predicted / traced:.2f}" if traced > 0 else "-"
      lines.append(f"| {name} | {op_type} | {variant or '-'} | {count:g} | "
                   f"{traced * 1e3:.3f} | {predicted * 1e3:.3f} | {ratio} | "
                   f"{n} |")
  return "\n".join(lines) + "\n"
