"""The calibration of a cluster and the calibrated cost model.

`Calibration`: fitted figures applied to the analytical model and to the
cluster's devices and links (`apply_calibration`, `CalibratedCostModel`);
`tfplace.measurement.calibration_fit` fits one from real runs. Its JSON file
(format "tfplace.calibration/1"):

      {
        "format": "tfplace.calibration/1",
        "compute_scale": {"GPU": 1.8, "CPU": 0.9},
        "op_type_scale": {"Conv2D": 1.2},
        "launch_overhead_s": {"GPU": 8e-6},
        "links": {"pcie": {"latency_s": 2e-5, "bandwidth": 9e9}},
        "transfer_overhead_s": {"CPU": 2e-4},
        "step_overhead_s": 1e-3,
        "overlap_latency": true,
        "notes": "fitted from 12 runs of inception_v3 on k80x2"
      }

  Every key but "format" is optional. `compute_scale` multiplies the
  analytical time (overhead included) of every op on devices of that type;
  `op_type_scale` multiplies the time of ops of that type (on top);
  `launch_overhead_s` replaces the devices' per-op overhead by type; `links`
  replaces latency and bandwidth of links (and the default link) of that kind;
  `transfer_overhead_s` replaces the devices' per-transfer host cost by type
  `step_overhead_s` sets the cluster's fixed step cost and
  `overlap_latency` its link model (see `tfplace.cost.cluster.Cluster`).
  Files written before these three existed load with no transfer overheads,
  a step overhead of 0 and `overlap_latency` false (the old behaviour).
"""

import dataclasses
import json
from typing import Mapping, Optional

import numpy as np

from tfplace.cost.analytical import AnalyticalConfig, AnalyticalCostModel
from tfplace.cost.cluster import Cluster, LinkSpec
from tfplace.cost.op_costs import CostModel, OpCosts
from tfplace.errors import ClusterError
from tfplace.graph.op_graph import OpGraph
from tfplace.io_utils import atomic_write, read_json

FORMAT = "tfplace.calibration/1"


@dataclasses.dataclass(frozen=True)
class Calibration:
  """Fitted corrections to the analytical model and the links (see module)."""
  compute_scale: Mapping[str, float] = dataclasses.field(default_factory=dict)
  op_type_scale: Mapping[str, float] = dataclasses.field(default_factory=dict)
  launch_overhead_s: Mapping[str, float] = dataclasses.field(
      default_factory=dict)
  links: Mapping[str, LinkSpec] = dataclasses.field(default_factory=dict)
  notes: str = ""
  transfer_overhead_s: Mapping[str, float] = dataclasses.field(
      default_factory=dict)
  step_overhead_s: float = 0.0
  overlap_latency: bool = False

  def __post_init__(self):
    _check_factors(self.transfer_overhead_s, "transfer_overhead_s",
                   allow_zero=True)
    _check_factors({"": self.step_overhead_s}, "step_overhead_s",
                   allow_zero=True)
    if not isinstance(self.overlap_latency, bool):
      raise ClusterError("calibration overlap_latency must be true or false, "
                         f"got {self.overlap_latency!r}")

  def to_dict(self) -> dict:
    return {"format": FORMAT, "compute_scale": dict(self.compute_scale),
            "op_type_scale": dict(self.op_type_scale),
            "launch_overhead_s": dict(self.launch_overhead_s),
            "links": {k: {"latency_s": v.latency_s, "bandwidth": v.bandwidth}
                      for k, v in self.links.items()},
            "transfer_overhead_s": dict(self.transfer_overhead_s),
            "step_overhead_s": self.step_overhead_s,
            "overlap_latency": self.overlap_latency, "notes": self.notes}

  def save(self, path: str) -> None:
    """Writes the JSON form atomically."""
    atomic_write(path, json.dumps(self.to_dict(), indent=2))

  @classmethod
  def from_dict(cls, data: dict) -> "Calibration":
    """Parses the JSON form; raises ClusterError if malformed."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
      raise ClusterError(f"a calibration must be a JSON object with "
                         f"\"format\": \"{FORMAT}\"")
    try:
      links = {k: LinkSpec(float(v["latency_s"]), float(v["bandwidth"]), k)
               for k, v in data.get("links", {}).items()}
      return cls(compute_scale=_factors(data, "compute_scale"),
                 op_type_scale=_factors(data, "op_type_scale"),
                 launch_overhead_s=_factors(data, "launch_overhead_s",
                                            allow_zero=True),
                 links=links, notes=str(data.get("notes", "")),
                 transfer_overhead_s=_factors(data, "transfer_overhead_s",
                                              allow_zero=True),
                 step_overhead_s=float(data.get("step_overhead_s", 0.0)),
                 overlap_latency=data.get("overlap_latency", False))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
      raise ClusterError(f"malformed calibration: {e!r}") from None

  @classmethod
  def load(cls, path: str) -> "Calibration":
    return cls.from_dict(read_json(path, "calibration", ClusterError))


def _factors(data: dict, key: str, allow_zero: bool = False) -> dict:
  out = {str(k): float(v) for k, v in data.get(key, {}).items()}
  _check_factors(out, key, allow_zero)
  return out


def _check_factors(values: Mapping[str, float], key: str,
                   allow_zero: bool) -> None:
  for k, v in values.items():
    try:
      v = float(v)
    except (TypeError, ValueError):
      raise ClusterError(f"calibration {key}[{k!r}] must be a number, "
                         f"got {v!r}") from None
    if not np.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
      raise ClusterError(f"calibration {key}[{k!r}] must be a "
                         f"{'non-negative' if allow_zero else 'positive'} "
                         f"finite number, got {v}")


def apply_calibration(cluster: Cluster, calibration: Calibration) -> Cluster:
  """The cluster with the calibration's step overhead and link model, and
  its links, launch and transfer overheads where the calibration has figures
  for their kind or device type."""
  devices = tuple(_calibrated_device(d, calibration) for d in cluster.devices)
  links = tuple(
      dataclasses.replace(l, latency_s=calibration.links[l.kind].latency_s,
                          bandwidth=calibration.links[l.kind].bandwidth)
      if l.kind in calibration.links else l for l in cluster.links)
  default = cluster.default_link
  if default.kind in calibration.links:
    spec = calibration.links[default.kind]
    default = LinkSpec(spec.latency_s, spec.bandwidth, default.kind)
  return dataclasses.replace(cluster, devices=devices, links=links,
                             default_link=default,
                             step_overhead_s=calibration.step_overhead_s,
                             overlap_latency=calibration.overlap_latency)


def _calibrated_device(device, calibration: Calibration):
  changes = {}
  if device.type in calibration.launch_overhead_s:
    changes["launch_overhead_s"] = calibration.launch_overhead_s[device.type]
  if device.type in calibration.transfer_overhead_s:
    changes["transfer_overhead_s"] = calibration.transfer_overhead_s[
        device.type]
  return dataclasses.replace(device, **changes) if changes else device


class CalibratedCostModel(CostModel):
  """The analytical model with a Calibration's compute factors applied.

  Apply `apply_calibration` to the cluster too, so links and launch overheads
  are calibrated as well.
  """

  name = "calibrated"

  def __init__(self, calibration: Calibration,
               config: Optional[AnalyticalConfig] = None):
    self.calibration = calibration
    self.base = AnalyticalCostModel(config or AnalyticalConfig())

  def estimate(self, graph: OpGraph, cluster: Cluster) -> OpCosts:
    base = self.base.estimate(graph, cluster)
    cal = self.calibration
    col = np.array([cal.compute_scale.get(d.type, 1.0) for d in cluster.devices])
    row = np.array([cal.op_type_scale.get(t, 1.0) for t in graph.op_types])
    return dataclasses.replace(
        base, compute_s=base.compute_s * row[:, None] * col[None, :])
