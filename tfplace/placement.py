"""Placement: op name -> device string, with validation and a JSON format.

The JSON format (stable; other tools may write it):

    {
      "format": "tfplace.placement/1",
      "placement": {"<op name>": "/job:localhost/replica:0/task:0/device:CPU:1",
                    ...},
      "metadata": {"graph_fingerprint": "...", "devices": [...],
                   "tfplace_version": "...", "tensorflow_version": "...",
                   "placer": "m_etf", "predicted_step_time_s": 0.0123}
    }

`placement` must name every op of the graph; device strings may be partial
("/device:GPU:0") and are stored in full form. `metadata` keys are optional
when reading.
"""

import dataclasses
import json
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from tfplace.cost.cluster import Cluster
from tfplace.device_names import canonical_device, device_type_of
from tfplace.errors import ClusterError, PlacementError
from tfplace.graph.op_graph import OpGraph
from tfplace.io_utils import atomic_write, read_json

FORMAT = "tfplace.placement/1"


@dataclasses.dataclass(frozen=True)
class PlacementMetadata:
  """Where a placement came from and what it is predicted to do.

  Attributes:
    graph_fingerprint: `OpGraph.fingerprint` of the graph it places.
    devices: the cluster's devices, in cluster order.
    placer: the placer that made it.
    predicted_step_time_s: the simulated step time (None if infeasible or
      not simulated).
    feasible: False if the simulator found a device out of memory; None if
      not simulated.
    oom_devices: the devices out of memory, if infeasible.
    predicted_peak_memory_bytes: device -> its simulated peak memory (the
      devices it uses; empty if not simulated).
    tfplace_version, tensorflow_version: the versions that wrote it.
    extra: other keys found in a placement file, kept as they were.
  """
  graph_fingerprint: Optional[str] = None
  devices: Sequence[str] = ()
  placer: Optional[str] = None
  predicted_step_time_s: Optional[float] = None
  feasible: Optional[bool] = None
  oom_devices: Tuple[str, ...] = ()
  predicted_peak_memory_bytes: Mapping[str, int] = dataclasses.field(
      default_factory=dict)
  tfplace_version: Optional[str] = None
  tensorflow_version: Optional[str] = None
  extra: Mapping[str, object] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Placement:
  """An assignment of every op to a device.

  Attributes:
    devices: op name -> full TF device string.
    metadata: provenance and prediction.
  """
  devices: Mapping[str, str]
  metadata: PlacementMetadata = PlacementMetadata()

  def __post_init__(self):
    """Stores every device string in full form; raises PlacementError."""
    devices: Dict[str, str] = {}
    for op_name, device in self.devices.items():
      try:
        devices[op_name] = canonical_device(device)
      except (ClusterError, TypeError) as e:
        raise PlacementError(f"op {op_name!r}: {e}") from None
    object.__setattr__(self, "devices", devices)

  # ---- construction ------------------------------------------------------

  @classmethod
  def from_array(cls, graph: OpGraph, cluster: Cluster, device_ids,
                 placer: Optional[str] = None,
                 predicted_step_time_s: Optional[float] = None) -> "Placement":
    """Builds a placement from device indices per op (cluster order)."""
    ids = np.asarray(device_ids)
    if ids.shape != (graph.num_ops,):
      raise PlacementError(f"expected {graph.num_ops} device ids, got shape "
                           f"{ids.shape}")
    names = cluster.device_names
    return cls(
        devices={op.name: names[int(d)] for op, d in zip(graph.ops, ids)},
        metadata=_metadata(graph, cluster, placer, predicted_step_time_s))

  def to_array(self, graph: OpGraph, cluster: Cluster) -> np.ndarray:
    """Device index per op (int32 [M]); raises PlacementError if invalid."""
    index = cluster.device_index
    out = np.empty(graph.num_ops, dtype=np.int32)
    for i, op in enumerate(graph.ops):
      device = self.devices.get(op.name)
      if device is None:
        raise PlacementError(f"op {op.name!r} is not placed")
      if device not in index:
        raise PlacementError(
            f"op {op.name!r} is placed on {device}, which is not a device of "
            f"cluster {cluster.name!r} ({', '.join(cluster.device_names)})")
      out[i] = index[device]
    return out

  def with_metadata(self, **changes) -> "Placement":
    return dataclasses.replace(
        self, metadata=dataclasses.replace(self.metadata, **changes))

  # ---- validation --------------------------------------------------------

  def validate(self, graph: OpGraph, cluster: Optional[Cluster] = None) -> None:
    """Checks the placement against the graph (and cluster, if given).

    Every op placed, no unknown op, device strings well formed (and in the
    cluster), a kernel for each op's device type, each colocation group on
    one device.

    Raises:
      PlacementError: naming the first problem found.
    """
    unknown = [n for n in self.devices if n not in graph.index]
    if unknown:
      raise PlacementError(f"placement names {len(unknown)} op(s) not in graph "
                           f"{graph.name!r}, e.g. {unknown[0]!r}")
    missing = [op.name for op in graph.ops if op.name not in self.devices]
    if missing:
      raise PlacementError(f"{len(missing)} op(s) are not placed, e.g. "
                           f"{missing[0]!r}")
    if cluster is not None:
      self.to_array(graph, cluster)
    for op in graph.ops:
      dtype = device_type_of(self.devices[op.name])
      if op.kernels and dtype not in op.kernels:
        raise PlacementError(
            f"op {op.name!r} ({op.type}) has no {dtype} kernel; it can run on "
            f"{sorted(op.kernels)}")
    for group in graph.colocation_groups:
      placed = {self.devices[graph.ops[i].name] for i in group}
      if len(placed) > 1:
        names = [graph.ops[i].name for i in group[:4]]
        raise PlacementError(
            f"colocation group of {len(group)} ops ({', '.join(names)}...) is "
            f"split over {sorted(placed)}; it must be on one device")

  # ---- GraphDef ----------------------------------------------------------

  def to_graph_def(self, graph: OpGraph):
    """A copy of the graph's GraphDef with every NodeDef.device set."""
    placed = type(graph.graph_def)()
    placed.CopyFrom(graph.graph_def)
    for node in placed.node:
      node.device = self.devices[node.name]
    return placed

  # ---- JSON --------------------------------------------------------------

  def to_dict(self) -> dict:
    meta = dataclasses.asdict(self.metadata)
    meta["devices"] = list(meta["devices"])
    meta["oom_devices"] = list(meta["oom_devices"]) or None
    meta["predicted_peak_memory_bytes"] = (
        dict(meta["predicted_peak_memory_bytes"]) or None)
    extra = meta.pop("extra")
    meta.update(extra)
    return {"format": FORMAT, "placement": dict(self.devices),
            "metadata": {k: v for k, v in meta.items() if v is not None}}

  def save(self, path: str) -> None:
    """Writes the JSON form atomically."""
    atomic_write(path, json.dumps(self.to_dict(), indent=1, sort_keys=False))

  @classmethod
  def from_dict(cls, data: dict) -> "Placement":
    if not isinstance(data, dict) or not isinstance(data.get("placement"), dict):
      raise PlacementError("placement JSON must be an object whose "
                           "'placement' maps op names to device strings")
    meta = dict(data.get("metadata") or {})
    known = {f.name for f in dataclasses.fields(PlacementMetadata)} - {"extra"}
    extra = {k: meta.pop(k) for k in list(meta) if k not in known}
    meta["devices"] = tuple(meta.get("devices") or ())
    meta["oom_devices"] = tuple(meta.get("oom_devices") or ())
    meta["predicted_peak_memory_bytes"] = {
        str(k): int(v) for k, v in
        (meta.get("predicted_peak_memory_bytes") or {}).items()}
    return cls(devices=data["placement"],
               metadata=PlacementMetadata(**meta, extra=extra))

  @classmethod
  def load(cls, path: str) -> "Placement":
    data = read_json(path, "placement", PlacementError)
    try:
      return cls.from_dict(data)
    except PlacementError as e:  # Which file (a cluster JSON given instead?).
      raise PlacementError(f"{path}: {e}") from None

  def device_counts(self) -> Dict[str, int]:
    counts: Dict[str, int] = {}
    for d in self.devices.values():
      counts[d] = counts.get(d, 0) + 1
    return counts


def placed_graph_def(graph: OpGraph, placement: Placement,
                     cluster: Optional[Cluster] = None):
  """The graph's GraphDef with every NodeDef.device set, after validation.

  Args:
    graph: the imported graph.
    placement: op name -> device.
    cluster: if given, every device must belong to it.

  Raises:
    PlacementError: the placement does not fit the graph (or cluster).
  """
  placement.validate(graph, cluster)
  return placement.to_graph_def(graph)


def _metadata(graph: OpGraph, cluster: Cluster, placer: Optional[str],
              predicted: Optional[float]) -> PlacementMetadata:
  import tensorflow as tf
  import tfplace
  return PlacementMetadata(
      graph_fingerprint=graph.fingerprint, devices=tuple(cluster.device_names),
      placer=placer,
      predicted_step_time_s=None if predicted is None else float(predicted),
      tfplace_version=tfplace.__version__, tensorflow_version=tf.__version__)


def device_list(placement: Placement) -> List[str]:
  """Distinct devices used, sorted."""
  return sorted(set(placement.devices.values()))
