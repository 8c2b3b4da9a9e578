"""Clusters: devices and the links between them, loadable from JSON.

JSON form (all numbers SI: seconds, bytes, bytes/s, FLOP/s):

    {
      "name": "2xK80",
      "devices": [
        {"name": "/job:localhost/replica:0/task:0/device:GPU:0", "type": "GPU",
         "peak_flops": 4.4e12, "memory_bandwidth": 2.4e11,
         "memory_bytes": 12e9, "launch_overhead_s": 1e-5, "slots": 1,
         "transfer_overhead_s": 0.0, "matmul_flops": 0.0, "conv_flops": 0.0,
         "copy_bandwidth": 0.0, "run_overhead_s": 0.0,
         "transfer_byte_s": 0.0, "conv_lanes": 0.0, "recv_issue_s": 0.0}
      ],
      "links": [{"src": "...GPU:0", "dst": "...GPU:1", "latency_s": 1e-5,
                 "bandwidth": 8e9, "kind": "pcie"}],
      "default_link": {"latency_s": 1e-5, "bandwidth": 8e9, "kind": "pcie"},
      "step_overhead_s": 0.0, "overlap_latency": false,
      "rendezvous_transfers": false
    }

Links are directed; a link listed once applies to both directions unless the
reverse is listed too. Pairs with no link use `default_link`.
`transfer_overhead_s` (per device) and `step_overhead_s` (per cluster) are
optional and default to 0, `overlap_latency` and `rendezvous_transfers`
(per cluster) to false (see `Device` and `Cluster`). `matmul_flops`,
`conv_flops` and `copy_bandwidth` are measured rates
(`tfplace.measurement.cluster_benchmark`), optional, 0 when not measured,
as are `random_uniform_rate` and `random_normal_rate` (values per second);
so are `conv_lanes`, `run_overhead_s`, `transfer_byte_s` and
`recv_issue_s` (per device, default 0), and the datasheet's `half_flops`
(tensor cores; 0: half precision runs at the float32 rate).
`conv_grad_buffers` (default true, written only when false) says whether a
CPU's convolution gradients take patch buffers from TF's allocator.
"""

import dataclasses
import functools
import json
import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from tfplace.device_names import canonical_device, device_type_of
from tfplace.errors import ClusterError
from tfplace.io_utils import read_json

# The link kind of gRPC between processes on one host (`LocalCluster`).
LOOPBACK = "loopback"
# Device fields holding measured rates (0: not measured).
_MEASURED_RATES = ("matmul_flops", "conv_flops", "copy_bandwidth",
                   "random_uniform_rate", "random_normal_rate")
# Optional device fields left out of the JSON form when 0.
_OMITTED_WHEN_ZERO = _MEASURED_RATES + ("conv_lanes", "run_overhead_s",
                                        "transfer_byte_s", "recv_issue_s",
                                        "half_flops")


def _positive(value, what: str) -> float:
  try:
    v = float(value)
  except (TypeError, ValueError):
    raise ClusterError(f"{what} must be a number, got {value!r}") from None
  if not math.isfinite(v) or v <= 0:
    raise ClusterError(f"{what} must be positive and finite, got {value!r}")
  return v


def _non_negative(value, what: str) -> float:
  try:
    v = float(value)
  except (TypeError, ValueError):
    raise ClusterError(f"{what} must be a number, got {value!r}") from None
  if not math.isfinite(v) or v < 0:
    raise ClusterError(f"{what} must be >= 0 and finite, got {value!r}")
  return v


@dataclasses.dataclass(frozen=True)
class Device:
  """One device a placement can use.

  Attributes:
    name: full TF device string.
    type: "CPU" or "GPU" (any TF device type).
    peak_flops: peak FLOP/s for float32 work.
    memory_bandwidth: device memory bandwidth, bytes/s.
    memory_bytes: memory available to the training step, bytes.
    launch_overhead_s: fixed cost per op execution (kernel launch, dispatch).
    slots: ops the device can run at once (CPU cores given to inter-op work).
    transfer_overhead_s: host time the device spends per tensor it sends to
      or receives from another device (serialization, RPC handling); it
      blocks the device's compute (see `tfplace.simulator.simulator`).
    matmul_flops: measured FLOP/s of a dense matmul on this device (0: not
      measured). Measured rates are what an op reaches, so the analytical
      model uses them as they are, where it scales the datasheet figures
      `peak_flops` and `memory_bandwidth` by efficiency factors.
    conv_flops: measured FLOP/s of a 2-D convolution (0: not measured).
    random_uniform_rate: measured float32 values per second of a uniform
      random op (`RandomUniform`: dropout's masks; 0: not measured). Random
      generators run a counter-based generator per value, far slower per
      element than a copy (`tfplace.cost.analytical`).
    random_normal_rate: the same of a normal random op
      (`RandomStandardNormal`, `StatelessRandomNormalV2`: generated inputs,
      noise).
    copy_bandwidth: measured bytes/s (read + written) of an element-wise op
      on tensors larger than the caches (0: not measured).
    run_overhead_s: seconds a step costs for this device when it runs any
      op of the step, on top of the cluster's `step_overhead_s` (the
      session master's call to run the device's part: an RPC to another
      worker, a local call on the master's own).
    transfer_byte_s: host seconds per byte of a tensor the device sends to
      or receives from another device, on top of `transfer_overhead_s`
      (copying the tensor through the RPC layer on a worker whose cores
      also compute); it blocks the device's compute like the per-message
      cost.
    conv_lanes: output channels a convolution needs to reach `conv_flops`
      (measured: the width of the vector unit its kernels fill along the
      channels, 16 float32 lanes with AVX-512); one with fewer runs at
      channels / conv_lanes of the rate (0: not measured, no such loss).
    recv_issue_s: host seconds the device spends starting each Recv of a
      step (its RecvTensor call) on a cluster with
      `Cluster.rendezvous_transfers`: a one-core TF server worker starts
      every Recv of its part of the step before its ops (profiled: 13-18
      us each here; `tfplace.measurement.recv_issue`). 0: not measured,
      no issue phase.
    half_flops: peak FLOP/s of float16 / bfloat16 matrix work (dense, on
      tensor cores: `tfplace.cost.analytical.TENSOR_CORE_OP_TYPES`), from
      the datasheet; 0: such work runs at the float32 rate (K80s, CPUs).
    conv_grad_buffers: a CPU's convolution gradients take their patch
      buffers from TF's allocator (TF's own kernels:
      `tfplace.cost.scratch`); False where a probe found they do not (TF
      runs oneDNN's kernels there by default: CPUs with AVX512_VNNI or
      newer; `tfplace.measurement.cluster_benchmark`).
  """
  name: str
  type: str
  peak_flops: float
  memory_bandwidth: float
  memory_bytes: float
  launch_overhead_s: float = 5e-6
  slots: int = 1
  transfer_overhead_s: float = 0.0
  matmul_flops: float = 0.0
  conv_flops: float = 0.0
  copy_bandwidth: float = 0.0
  run_overhead_s: float = 0.0
  transfer_byte_s: float = 0.0
  conv_lanes: float = 0.0
  recv_issue_s: float = 0.0
  random_uniform_rate: float = 0.0
  random_normal_rate: float = 0.0
  half_flops: float = 0.0
  conv_grad_buffers: bool = True

  def __post_init__(self):
    full = canonical_device(self.name)
    object.__setattr__(self, "name", full)
    object.__setattr__(self, "type", device_type_of(full))
    _positive(self.peak_flops, f"{full}: peak_flops")
    _positive(self.memory_bandwidth, f"{full}: memory_bandwidth")
    _positive(self.memory_bytes, f"{full}: memory_bytes")
    _non_negative(self.launch_overhead_s, f"{full}: launch_overhead_s")
    object.__setattr__(self, "transfer_overhead_s", _non_negative(
        self.transfer_overhead_s, f"{full}: transfer_overhead_s"))
    for field in _OMITTED_WHEN_ZERO:
      object.__setattr__(self, field, _non_negative(getattr(self, field),
                                                    f"{full}: {field}"))
    if int(self.slots) != self.slots or self.slots < 1:
      raise ClusterError(f"{full}: slots must be a positive integer")
    if not isinstance(self.conv_grad_buffers, bool):
      raise ClusterError(f"{full}: conv_grad_buffers must be true or false, "
                         f"got {self.conv_grad_buffers!r}")


@dataclasses.dataclass(frozen=True)
class Link:
  """A directed link: a transfer of b bytes takes latency_s + b / bandwidth."""
  src: str
  dst: str
  latency_s: float
  bandwidth: float
  kind: str = "pcie"

  def __post_init__(self):
    object.__setattr__(self, "src", canonical_device(self.src))
    object.__setattr__(self, "dst", canonical_device(self.dst))
    _non_negative(self.latency_s, f"link {self.src}->{self.dst}: latency_s")
    _positive(self.bandwidth, f"link {self.src}->{self.dst}: bandwidth")


@dataclasses.dataclass(frozen=True)
class LinkSpec:
  """Latency and bandwidth of a link without endpoints (the default link)."""
  latency_s: float
  bandwidth: float
  kind: str = "pcie"

  def __post_init__(self):
    _non_negative(self.latency_s, "default_link.latency_s")
    _positive(self.bandwidth, "default_link.bandwidth")


@dataclasses.dataclass(frozen=True)
class Cluster:
  """Devices and links. Device order defines device indices 0..D-1.

  Attributes:
    name: cluster name.
    devices: the devices, in index order.
    links: explicit links (others use `default_link`).
    default_link: latency and bandwidth of pairs without an explicit link.
    step_overhead_s: fixed cost added to every step (the runtime's per-run
      dispatch work), whatever the placement.
    overlap_latency: False (default): a transfer holds its link for
      latency + bytes / bandwidth, one transfer at a time. True: it holds
      the link for bytes / bandwidth only and arrives `latency` later, so
      the latencies of queued transfers overlap (many RPCs in flight, as in
      TF's gRPC runtime).
    rendezvous_transfers: True: message work is done by a device with no
      op running or ready, on its own slots: a transfer is sent once its
      sender has nothing to run and parsed once its receiver has nothing
      to run, and a loopback link's latency is work on both ends
      (`host_latency`: the receiver's half only where the arrival wakes
      it; TF's gRPC runtime on one-core CPU workers queues RPC
      work behind the ops it can run, on the cores that compute; see
      `tfplace.simulator.simulator`). False (default): transfers need only
      their link.
  """
  name: str
  devices: Tuple[Device, ...]
  links: Tuple[Link, ...] = ()
  default_link: LinkSpec = LinkSpec(latency_s=1e-5, bandwidth=8e9)
  step_overhead_s: float = 0.0
  overlap_latency: bool = False
  rendezvous_transfers: bool = False

  def __post_init__(self):
    object.__setattr__(self, "devices", tuple(self.devices))
    object.__setattr__(self, "links", tuple(self.links))
    if not self.devices:
      raise ClusterError(f"cluster {self.name!r} has no devices")
    object.__setattr__(self, "step_overhead_s", _non_negative(
        self.step_overhead_s, f"cluster {self.name!r}: step_overhead_s"))
    _flag(self.overlap_latency, f"cluster {self.name!r}: overlap_latency")
    _flag(self.rendezvous_transfers,
          f"cluster {self.name!r}: rendezvous_transfers")
    names = [d.name for d in self.devices]
    if len(set(names)) != len(names):
      twice = sorted({n for n in names if names.count(n) > 1})
      raise ClusterError(f"cluster {self.name!r} lists a device twice: "
                         f"{', '.join(twice)}")
    for link in self.links:
      for end in (link.src, link.dst):
        if end not in names:
          raise ClusterError(f"link endpoint {end} is not a device of "
                             f"cluster {self.name!r}")

  @property
  def num_devices(self) -> int:
    return len(self.devices)

  @functools.cached_property
  def device_names(self) -> List[str]:
    return [d.name for d in self.devices]

  @functools.cached_property
  def device_index(self) -> Dict[str, int]:
    return {d.name: i for i, d in enumerate(self.devices)}

  def devices_of_type(self, device_type: str) -> List[int]:
    return [i for i, d in enumerate(self.devices) if d.type == device_type]

  @functools.cached_property
  def link_latency(self) -> np.ndarray:
    """[D, D] seconds; 0 on the diagonal."""
    return self._link_matrices()[0]

  @functools.cached_property
  def link_bandwidth(self) -> np.ndarray:
    """[D, D] bytes/s; inf on the diagonal."""
    return self._link_matrices()[1]

  @functools.cached_property
  def host_latency(self) -> np.ndarray:
    """[D, D] seconds of each link's latency spent on the cores of its two
    ends: all of it for a "loopback" link between one-core TF server
    workers (`rendezvous_transfers`: gRPC over loopback has no wire, its
    latency is system calls and thread wake-ups), 0 elsewhere."""
    lat, _, loopback = self._link_matrices()
    return np.where(loopback, lat, 0.0) if self.rendezvous_transfers else (
        np.zeros_like(lat))

  def _link_matrices(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(latency, bandwidth, is a loopback link), each [D, D]."""
    d = self.num_devices
    lat = np.full((d, d), self.default_link.latency_s)
    bw = np.full((d, d), self.default_link.bandwidth)
    loopback = np.full((d, d), self.default_link.kind == LOOPBACK)
    explicit = set()
    for link in self.links:
      i, j = self.device_index[link.src], self.device_index[link.dst]
      lat[i, j], bw[i, j] = link.latency_s, link.bandwidth
      loopback[i, j] = link.kind == LOOPBACK
      explicit.add((i, j))
    for link in self.links:
      i, j = self.device_index[link.src], self.device_index[link.dst]
      if (j, i) not in explicit:
        lat[j, i], bw[j, i] = link.latency_s, link.bandwidth
        loopback[j, i] = link.kind == LOOPBACK
    np.fill_diagonal(lat, 0.0)
    np.fill_diagonal(bw, np.inf)
    np.fill_diagonal(loopback, False)
    return lat, bw, loopback

  def transfer_time(self, src: int, dst: int, nbytes: float) -> float:
    if src == dst:
      return 0.0
    return float(self.link_latency[src, dst] + nbytes / self.link_bandwidth[src, dst])

  # ---- JSON --------------------------------------------------------------

  def to_dict(self) -> dict:
    return {
        "name": self.name,
        "devices": [_device_dict(d) for d in self.devices],
        "links": [dataclasses.asdict(l) for l in self.links],
        "default_link": dataclasses.asdict(self.default_link),
        "step_overhead_s": self.step_overhead_s,
        "overlap_latency": self.overlap_latency,
        "rendezvous_transfers": self.rendezvous_transfers,
    }

  def to_json(self) -> str:
    return json.dumps(self.to_dict(), indent=2)

  @classmethod
  def from_dict(cls, data: dict, name: Optional[str] = None) -> "Cluster":
    """Builds a cluster from the JSON form; raises ClusterError if malformed."""
    if not isinstance(data, dict):
      raise ClusterError("cluster JSON must be an object with 'devices'")
    devices = data.get("devices")
    if not isinstance(devices, list) or not devices:
      raise ClusterError("cluster JSON has no devices: 'devices' must be a "
                         "non-empty list")
    return cls(
        name=str(data.get("name", name or "cluster")),
        devices=tuple(_build_device(d) for d in devices),
        links=tuple(_build(Link, l, "link") for l in data.get("links", [])),
        default_link=_build(LinkSpec, data.get(
            "default_link", {"latency_s": 1e-5, "bandwidth": 8e9}),
                            "default_link"),
        step_overhead_s=_non_negative(data.get("step_overhead_s", 0.0),
                                      "step_overhead_s"),
        overlap_latency=_flag(data.get("overlap_latency", False),
                              "overlap_latency"),
        rendezvous_transfers=_flag(data.get("rendezvous_transfers", False),
                                   "rendezvous_transfers"))

  @classmethod
  def from_json_file(cls, path: str) -> "Cluster":
    return cls.from_dict(read_json(path, "cluster", ClusterError), name=path)


def _device_dict(device: Device) -> dict:
  """A device's JSON form; measured rates only where measured."""
  out = dataclasses.asdict(device)
  for field in _OMITTED_WHEN_ZERO:
    if not out[field]:
      del out[field]
  if out["conv_grad_buffers"]:
    del out["conv_grad_buffers"]
  return out


def _flag(value, what: str) -> bool:
  if not isinstance(value, bool):
    raise ClusterError(f"{what} must be true or false, got {value!r}")
  return value


def _build_device(fields) -> Device:
  """A device of the JSON form; its "type" must be its name's."""
  device = _build(Device, fields, "device")
  given = fields["type"]
  if not isinstance(given, str) or given.upper() != device.type:
    raise ClusterError(
        f"device {device.name}: type {given!r} does not match its name, a "
        f"{device.type}; the name decides the type: fix the name or the type")
  return device


def _build(kind, fields, what: str):
  if not isinstance(fields, dict):
    raise ClusterError(f"each {what} must be a JSON object, got {fields!r}")
  allowed = {f.name for f in dataclasses.fields(kind)}
  unknown = set(fields) - allowed
  if unknown:
    raise ClusterError(f"{what} has unknown keys {sorted(unknown)}; "
                       f"allowed: {sorted(allowed)}")
  missing = [f.name for f in dataclasses.fields(kind)
             if f.name not in fields and f.default is dataclasses.MISSING
             and f.default_factory is dataclasses.MISSING]
  if missing:
    raise ClusterError(f"{what} {fields!r} lacks the keys {missing} (`tfplace "
                       "clusters --show k80x2` prints a complete cluster)")
  try:
    return kind(**fields)
  except TypeError as e:
    raise ClusterError(f"{what} {fields!r}: {e}") from None


def make_cluster(name: str, devices: Sequence[Device],
                 links: Sequence[Link] = (),
                 default_link: Optional[LinkSpec] = None,
                 step_overhead_s: float = 0.0) -> Cluster:
  """Convenience constructor used by presets and tests."""
  return Cluster(name=name, devices=tuple(devices), links=tuple(links),
                 default_link=default_link or LinkSpec(1e-5, 8e9),
                 step_overhead_s=step_overhead_s)
