"""How much a shared machine changed between two cluster benchmarks.

A calibration holds the cluster's figures at the time it was measured
(`cluster_benchmark`); runs measured minutes later see the machine as it is
then. On a shared host the two differ (other tenants, frequency scaling),
and no calibration can predict that. `machine_drift` compares two
benchmarks of the same cluster, figure by figure, as time ratios (later /
earlier, > 1: slower now), so a prediction error can be read next to the
change of the machine it was judged on.
"""

import dataclasses
import itertools
from typing import Optional, Sequence

import numpy as np

from tfplace.cost.calibrated import STEADY_LIMIT, Calibration, OpTypeCost
from tfplace.measurement.cluster_benchmark import ClusterBenchmark


@dataclasses.dataclass(frozen=True)
class MachineDrift:
  """Time ratios, later / earlier benchmark (1.0: unchanged).

  Attributes:
    compute: median over devices and the matmul and conv rates of the time
      a fixed amount of work takes.
    per_op: median over devices of the per-op overhead (an untraced tiny
      op): on graphs of many small ops it moves one-device steps more than
      compute does.
    message: median over links of the per-message host cost.
    empty_step: the empty step on every device.
  """
  compute: float
  per_op: float
  message: float
  empty_step: float

  def describe(self) -> str:
    """E.g. "compute x1.02, per op x1.10, per message x1.31, empty step
    x0.95"."""
    return (f"compute x{self.compute:.2f}, per op x{self.per_op:.2f}, "
            f"per message x{self.message:.2f}, "
            f"empty step x{self.empty_step:.2f}")

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)

  def largest(self) -> float:
    """The largest of the four ratios, or of their inverses (>= 1)."""
    return max((max(r, 1.0 / r) for r in dataclasses.astuple(self)
                if r > 0), default=1.0)


def machine_drift(earlier: ClusterBenchmark,
                  later: ClusterBenchmark) -> MachineDrift:
  """The change from `earlier` to `later` (benchmarks of the same cluster;
  devices and links matched by name, unmatched ones ignored)."""
  before = {d.device: d for d in earlier.devices}
  compute = [getattr(before[d.device], rate) / getattr(d, rate)
             for d in later.devices if d.device in before
             for rate in ("matmul_flops", "conv_flops")]
  per_op = [d.op_overhead_s / before[d.device].op_overhead_s
            for d in later.devices if d.device in before
            and before[d.device].op_overhead_s > 0]
  links = {(l.src, l.dst): l for l in earlier.links}
  message = [l.message_overhead_s / links[(l.src, l.dst)].message_overhead_s
             for l in later.links if (l.src, l.dst) in links
             and links[(l.src, l.dst)].message_overhead_s > 0]
  return MachineDrift(
      compute=_median(compute), per_op=_median(per_op),
      message=_median(message),
      empty_step=later.empty_step_s / earlier.empty_step_s)


def benchmark_spread(benches: Sequence[ClusterBenchmark]
                     ) -> Optional[MachineDrift]:
  """How far repeated benchmarks of one cluster differ: per figure, the
  largest ratio between any two of them (slower / faster, >= 1). A
  calibration takes its figures' medians over benchmarks before, amid and
  after its runs; their spread says how steady the machine was meanwhile,
  and so how far a prediction made with it can be off for that reason
  alone. None with fewer than two benchmarks."""
  if len(benches) < 2:
    return None
  pairs = [machine_drift(a, b)
           for a, b in itertools.combinations(benches, 2)]
  def widest(figure):
    return max((max(r, 1.0 / r) for r in (getattr(d, figure) for d in pairs)
                if r > 0), default=1.0)
  return MachineDrift(*(widest(f.name)
                        for f in dataclasses.fields(MachineDrift)))


def describe_spread(spread: Optional[MachineDrift], count: int) -> str:
  """One line on the calibration's benchmarks ("" when there is no
  spread), ending in a warning when they differ by more than
  `STEADY_LIMIT`."""
  if spread is None:
    return ""
  text = (f"the machine during calibration: its {count} benchmarks differ "
          f"by up to {spread.describe()}")
  if spread.largest() > STEADY_LIMIT:
    text += (f"; NOT steady (over x{STEADY_LIMIT:.2f}): predictions made "
             "with this calibration can be off by as much for that reason "
             "alone; calibrate again when the machine is quieter")
  return text


def drift_adjusted(calibration: Calibration,
                   drift: MachineDrift) -> Calibration:
  """The calibration as the machine was when `drift`'s later benchmark
  was taken: every fitted op cost and the analytical scale of unfitted ops
  times `compute`, the launch overheads times `per_op`, the per-message
  costs (transfer, Recv issue) times `message`, the run and step overheads
  times `empty_step`. Launch-bound figures (GPU launches, dispatch, stall)
  are kept. What a prediction still misses with it is the model's error,
  not the machine's change (`scripts/fidelity.py --cross` reports both)."""
  def scaled(values, factor):
    return {k: v * factor for k, v in values.items()}
  op_types = {dtype: {op: _scaled_cost(cost, drift.compute)
                      for op, cost in fits.items()}
              for dtype, fits in calibration.op_types.items()}
  return dataclasses.replace(
      calibration, op_types=op_types,
      compute_scale=scaled(calibration.compute_scale, drift.compute),
      launch_overhead_s=scaled(calibration.launch_overhead_s, drift.per_op),
      transfer_overhead_s=scaled(calibration.transfer_overhead_s,
                                 drift.message),
      recv_issue_s=scaled(calibration.recv_issue_s, drift.message),
      run_overhead_s=scaled(calibration.run_overhead_s, drift.empty_step),
      step_overhead_s=calibration.step_overhead_s * drift.empty_step)


def _scaled_cost(cost: OpTypeCost, factor: float) -> OpTypeCost:
  return dataclasses.replace(
      cost, fixed_s=cost.fixed_s * factor, scale=cost.scale * factor,
      curve_time_s=tuple(t * factor for t in cost.curve_time_s),
      variants={k: _scaled_cost(v, factor)
                for k, v in cost.variants.items()})


def _median(values) -> float:
  return float(np.median(values)) if values else 1.0
