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

import numpy as np

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


def _median(values) -> float:
  return float(np.median(values)) if values else 1.0
