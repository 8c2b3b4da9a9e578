"""Microbenchmarks of a running TF server cluster (or of this process's CPU
and GPUs): what its devices and links really do, so that the simulator
starts from measurements, not guesses.

One session on the cluster's target runs small graphs, each pinned to its
devices (`BenchmarkConfig` sizes them); step times are medians of 2 x
`MeasureConfig.steps` runs (at least `MIN_RUNS`) after warmup, op durations
come from three FULL_TRACE runs. Figures that are differences of two step
times (per op, per message, per hop, per byte) are medians of back-to-back
pairs of the two graphs' steps, their order alternating
(`PAIRED_RUNS_FACTOR` times more runs): on this 2-core machine that cut
the spread of the per-message cost over ten repeats (interquartile range
over median) from 25-46 % to 7-25 %. `median_benchmark` takes each
figure's median over several benchmarks. Per device:

* dense matmul FLOP/s and 3x3 convolution FLOP/s (traced durations of a
  chain of large ops), copy bandwidth (an element-wise add on tensors
  larger than the caches: bytes read + written per second);
* random values per second of a uniform and of a normal random op
  (traced; a generator's rounds per value cost far more than a copy of
  it: 5 and 20 ns per float32 value on a core here);
* on CPUs, the convolution lanes: the same convolutions with 2 output
  channels instead of 64; a kernel that vectorizes along the output
  channels takes as long for 2 as for a full vector of them, so lanes =
  64 x their time / the full convolutions' time (~16 here: AVX-512,
  float32);
* on CPUs, whether convolution gradients take patch buffers from TF's
  allocator: one traced filter gradient's peak beyond its output (TF's own
  kernel takes 32 MiB for it; oneDNN's, which TF runs by default on CPUs
  with AVX512_VNNI or newer, none that the allocator shows);
* the per-op overhead: a chain of tiny scalar ops, (its step time - an
  empty step's) / ops; and the tracer's cost per op (the tiny ops' traced
  duration), which the per-op fit subtracts from traced durations;
* the empty step: a step that fetches a scalar made on the device (as a
  one-device training step fetches its loss);
* on accelerators, the launch cost per launch kind
  (`tfplace.cost.launch_kinds`): a chain of small ops of the kind, (its
  untraced step time - the empty step's) / ops; the element-wise kind is
  the per-op overhead. Their matmul and convolution rates come from
  GPU-sized ops (a CPU-sized 384^3 matmul is 2-10 us on an H200, at the
  tracer's 1 us resolution).

Per pair of devices (both directions), in the simulator's own terms
(`tfplace.simulator.simulator`: a transfer costs its sender and receiver a
host overhead each, and arrives `latency + bytes / bandwidth` later):

* the per-message host cost: k independent scalars sent a -> b, each read
  by its own op: the step time's slope in k is one message's cost (the two
  ends work in a pipeline) plus a tiny op;
* the latency: a ping-pong chain of tiny ops alternating between the two
  devices: each hop costs a tiny op, two host costs and the latency;
* the bandwidth: one tensor of n bytes sent a -> b minus the same graph on
  a alone, least squares over the sizes: the slope is 1 / bandwidth.

`ClusterBenchmark.apply(cluster)` gives the measured cluster: devices with
the measured rates and overheads, a link per measured pair, the empty steps
split into a step overhead and a run overhead per device used
(`ClusterBenchmark.step_overheads`: on a server cluster the session's
master calls each worker that has ops of the step; a step on the master's
own worker only is cheaper), latencies overlapped (TF's gRPC runtime has
many RecvTensor calls in flight).
"""

import dataclasses
import statistics
import time
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from absl import logging
import numpy as np
from tqdm.auto import tqdm

from tfplace.cost.cluster import Cluster, Link
from tfplace.cost.launch_kinds import ELEMENTWISE
from tfplace.device_names import device_type_of
from tfplace.errors import MeasureError
from tfplace.graph.op_graph import StepFetches
from tfplace.measurement.config import MeasureConfig
from tfplace.measurement.session import (StepSession, TransientRunError,
                                         tf_errors)
from tfplace.measurement.timing import op_records
from tfplace.units import format_bytes, format_seconds

FORMAT = "tfplace.cluster_benchmark/1"
# The fewest timed runs behind each median (the graphs are small and fast).
MIN_RUNS = 10
# Paired differences (per-op, per-message, per-hop and per-byte costs) take
# this many times more runs: they are small differences of noisy steps.
PAIRED_RUNS_FACTOR = 3


@dataclasses.dataclass(frozen=True)
class BenchmarkConfig:
  """Sizes of the microbenchmarks.

  Attributes:
    matmul_size: n of the n x n x n matmuls.
    conv_shape: (batch, height = width, channels) of the 3x3 convolutions
      (channels in = out).
    accelerator_matmul_size, accelerator_conv_shape: the same on
      accelerators.
    launch_ops: ops of each launch-kind chain (accelerators).
    narrow_channels: output channels of the narrow convolutions (the same
      input) that measure `DeviceBenchmark.conv_lanes`.
    copy_elements: float32 elements of the element-wise add (keep it above
      the caches: 16M elements = 64 MB per tensor).
    random_values: float32 values of each uniform and normal random op.
    chain_ops: ops of each chain (large ops, tiny ops).
    tiny_ops: tiny scalar ops of the per-op overhead chain.
    messages: messages of the fan-out and hops of the ping-pong chain.
    transfer_sizes: bytes of the single tensors of the bandwidth fit.
  """
  matmul_size: int = 384
  conv_shape: Tuple[int, int, int] = (4, 32, 64)
  accelerator_matmul_size: int = 4096
  accelerator_conv_shape: Tuple[int, int, int] = (32, 56, 128)
  launch_ops: int = 64
  narrow_channels: int = 2
  copy_elements: int = 1 << 24
  random_values: int = 1 << 18
  chain_ops: int = 3
  tiny_ops: int = 1000
  messages: int = 32
  transfer_sizes: Tuple[int, ...] = (4 << 10, 2 << 20, 8 << 20)


@dataclasses.dataclass(frozen=True)
class DeviceBenchmark:
  """What one device measured.

  Attributes:
    device: the device.
    matmul_flops: dense matmul FLOP/s.
    conv_flops: 3x3 convolution FLOP/s.
    copy_bandwidth: bytes read + written per second by an element-wise op.
    op_overhead_s: seconds per tiny op in an untraced step (dispatch
      included): the launch overhead.
    traced_op_s: the traced duration of a tiny op (what tracing adds).
    empty_step_s: a step that fetches a scalar made on this device.
    conv_lanes: output channels a convolution needs to run at `conv_flops`
      (the full convolutions' channels x the narrow ones' time / theirs,
      within [`narrow_channels`, channels]); 0: not measured (accelerators,
      and files written before it was).
    recv_issue_s: seconds to start one Recv, from a profiled step
      (`tfplace.measurement.recv_issue`); 0: not measured.
    launch_s: on accelerators, launch kind (`tfplace.cost.launch_kinds`)
      -> untraced seconds per op of that kind; empty on CPUs (and in files
      written before it was measured).
    random_uniform_rate, random_normal_rate: float32 values per second of a
      uniform and a normal random op (traced); 0: not measured (files
      written before they were).
    conv_grad_buffers: on a CPU, whether a traced convolution filter
      gradient took at least half the patch buffer TF's own kernel takes
      from the allocator (`cluster_benchmark_graphs.CONV_GRAD_PROBE`;
      false where TF runs oneDNN's kernels); None: not measured
      (accelerators, files written before it was).
  """
  device: str
  matmul_flops: float
  conv_flops: float
  copy_bandwidth: float
  op_overhead_s: float
  traced_op_s: float
  empty_step_s: float
  conv_lanes: float = 0.0
  recv_issue_s: float = 0.0
  launch_s: Mapping[str, float] = dataclasses.field(default_factory=dict)
  random_uniform_rate: float = 0.0
  random_normal_rate: float = 0.0
  conv_grad_buffers: Optional[bool] = None


@dataclasses.dataclass(frozen=True)
class LinkBenchmark:
  """What one pair of devices measured (src -> dst).

  Attributes:
    src: sending device.
    dst: receiving device.
    message_overhead_s: host seconds per message (each end).
    latency_s: seconds a message is in flight beyond the host costs.
    bandwidth: bytes per second.
    hop_s: one hop of the ping-pong chain (a tiny op, the host cost at
      both ends and the latency).
    host_byte_s: host seconds per byte each end pays (0 as measured: the
      whole per-byte time is on the link; see
      `ClusterBenchmark.with_message_share`).
  """
  src: str
  dst: str
  message_overhead_s: float
  latency_s: float
  bandwidth: float
  hop_s: float = 0.0
  host_byte_s: float = 0.0


@dataclasses.dataclass(frozen=True)
class ClusterBenchmark:
  """The microbenchmarks of a cluster (see the module docstring).

  Attributes:
    devices: one per device, in the cluster's order.
    links: one per ordered pair of devices.
    empty_step_s: a step that runs a NoOp on every device and fetches a
      scalar from the last one.
  """
  devices: Tuple[DeviceBenchmark, ...]
  links: Tuple[LinkBenchmark, ...]
  empty_step_s: float

  def step_overheads(self) -> Tuple[float, Dict[str, float]]:
    """(cluster step overhead, device -> run overhead) from the empty steps,
    taken as additive: a step on devices S costs base + sum of run_d over S.
    With the one-device steps and the all-device step, base = (sum of the
    one-device steps - the all-device step) / (D - 1), within [0, the
    cheapest one-device step]; run_d = empty_d - base."""
    empty = [d.empty_step_s for d in self.devices]
    if len(empty) == 1:
      base = empty[0]
    else:
      base = (sum(empty) - self.empty_step_s) / (len(empty) - 1)
      base = float(np.clip(base, 0.0, min(empty)))
    return base, {d.device: d.empty_step_s - base for d in self.devices}

  def with_message_share(self, share: float, byte_share: float = 0.0,
                         extra_latency_s: float = 0.0
                         ) -> "ClusterBenchmark":
    """The figures with `share` of each measured per-message cost charged
    to each end, and the latency that keeps a ping-pong hop as measured,
    plus `extra_latency_s`; and `byte_share` of the measured time per byte
    spent by the hosts.

    The simulator charges a message's host cost to its sender and to its
    receiver's first consumer, so a chain of messages pays it twice; on a
    real worker part of the receiving work runs while the worker waits for
    the message anyway. The measured time per byte (1 / bandwidth) is
    split the same way: `byte_share` of it is host work (copies through
    the RPC layer, on the cores that also compute), half charged to each
    end (`host_byte_s`), the rest stays on the link (bandwidth /
    (1 - byte_share)), so one transfer in a chain still takes the measured
    time. `tfplace.measurement.calibration_fit` picks both shares (message
    share in [0.5, 1], byte share in [0, 0.9]) on the calibration suite's
    split runs. On a loopback link (rendezvous transfers) the latency is
    host work at both ends, and what a message costs inside a step can
    exceed what the idle benchmarks show: `extra_latency_s`, fitted there
    on the same runs, is that excess.
    """
    if not 0.0 <= byte_share < 1.0:
      raise MeasureError(f"byte_share must be in [0, 1), got {byte_share}")
    if not extra_latency_s >= 0.0:
      raise MeasureError(
          f"extra_latency_s must be >= 0, got {extra_latency_s}")
    tiny = {d.device: d.op_overhead_s for d in self.devices}
    links = []
    for l in self.links:
      cost = share * l.message_overhead_s
      hop_tiny = (tiny.get(l.src, 0.0) + tiny.get(l.dst, 0.0)) / 2
      latency = extra_latency_s + (
          max(0.0, l.hop_s - hop_tiny - 2 * cost) if l.hop_s else
          l.latency_s)
      links.append(dataclasses.replace(
          l, message_overhead_s=cost, latency_s=latency,
          bandwidth=l.bandwidth / (1.0 - byte_share),
          host_byte_s=byte_share / (2.0 * l.bandwidth)))
    return dataclasses.replace(self, links=tuple(links))

  def apply(self, cluster: Cluster) -> Cluster:
    """`cluster` with the measured figures (see the module docstring)."""
    by_name = {d.device: d for d in self.devices}
    per_device = _median_per_end(self.links, "message_overhead_s")
    per_byte = _median_per_end(self.links, "host_byte_s")
    base, run = self.step_overheads()
    devices = []
    for d in cluster.devices:
      m = by_name.get(d.name)
      if m is None:
        devices.append(d)
        continue
      devices.append(dataclasses.replace(
          d, peak_flops=max(m.matmul_flops, m.conv_flops),
          memory_bandwidth=m.copy_bandwidth, matmul_flops=m.matmul_flops,
          conv_flops=m.conv_flops, copy_bandwidth=m.copy_bandwidth,
          launch_overhead_s=m.op_overhead_s, run_overhead_s=run[d.name],
          conv_lanes=m.conv_lanes, recv_issue_s=m.recv_issue_s,
          random_uniform_rate=m.random_uniform_rate,
          random_normal_rate=m.random_normal_rate,
          conv_grad_buffers=(d.conv_grad_buffers if m.conv_grad_buffers
                             is None else m.conv_grad_buffers),
          transfer_overhead_s=per_device.get(d.name, d.transfer_overhead_s),
          transfer_byte_s=per_byte.get(d.name, d.transfer_byte_s)))
    names, kinds = set(cluster.device_names), link_kinds(cluster)
    links = tuple(Link(l.src, l.dst, l.latency_s, l.bandwidth,
                       kinds.get((l.src, l.dst), cluster.default_link.kind))
                  for l in self.links if {l.src, l.dst} <= names)
    return dataclasses.replace(cluster, devices=tuple(devices), links=links,
                               step_overhead_s=base, overlap_latency=True)

  def describe(self) -> str:
    """The measured figures, one line per device and per link."""
    lines = []
    for d in self.devices:
      lines.append(
          f"{d.device}: matmul {d.matmul_flops / 1e9:.1f} GFLOP/s, conv "
          f"{d.conv_flops / 1e9:.1f} GFLOP/s, copy "
          f"{format_bytes(d.copy_bandwidth)}/s, per op "
          f"{format_seconds(d.op_overhead_s)} (traced "
          f"{format_seconds(d.traced_op_s)}), empty step "
          f"{format_seconds(d.empty_step_s)}"
          + (f", conv lanes {d.conv_lanes:.1f}" if d.conv_lanes else "")
          + (f", random uniform {d.random_uniform_rate / 1e6:.0f} / normal "
             f"{d.random_normal_rate / 1e6:.0f} M values/s"
             if d.random_uniform_rate else "")
          + (f", Recv issue {format_seconds(d.recv_issue_s)}"
             if d.recv_issue_s else "")
          + (", convolution gradients take no patch buffers from TF's "
             "allocator (oneDNN's kernels)" if d.conv_grad_buffers is False
             else "")
          + ("".join(f"\n  launch {kind}: {format_seconds(s)} per op"
                     for kind, s in d.launch_s.items())))
    for l in self.links:
      lines.append(
          f"{l.src} -> {l.dst}: per message "
          f"{format_seconds(l.message_overhead_s)}, latency "
          f"{format_seconds(l.latency_s)}, bandwidth "
          f"{format_bytes(l.bandwidth)}/s")
    lines.append(f"empty step on every device: "
                 f"{format_seconds(self.empty_step_s)}")
    return "\n".join(lines)

  def to_dict(self) -> dict:
    return {"format": FORMAT,
            "devices": [dataclasses.asdict(d) for d in self.devices],
            "links": [dataclasses.asdict(l) for l in self.links],
            "empty_step_s": self.empty_step_s}

  @classmethod
  def from_dict(cls, data: dict) -> "ClusterBenchmark":
    """Parses `to_dict`'s form; raises MeasureError if malformed or if a
    figure is not physical (not positive and finite; latency and per-op
    costs may be 0)."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
      raise MeasureError(f"a cluster benchmark must have \"format\": "
                         f"\"{FORMAT}\"")
    try:
      result = cls(
          devices=tuple(DeviceBenchmark(**dict(d, launch_s={
              str(k): float(v) for k, v in d.get("launch_s", {}).items()}))
                        for d in data["devices"]),
          links=tuple(LinkBenchmark(**l) for l in data["links"]),
          empty_step_s=float(data["empty_step_s"]))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
      raise MeasureError(f"malformed cluster benchmark: {e!r}") from None
    check_physical(result)
    return result


def median_benchmark(benches: Sequence[ClusterBenchmark]) -> ClusterBenchmark:
  """Figure by figure, the median of several benchmarks of one cluster
  (devices and links matched by position): one benchmark is a few seconds
  of a shared machine, and a burst of other load in them would otherwise
  set the calibration's overheads for good.

  Raises:
    MeasureError: no benchmarks, or benchmarks of different clusters.
  """
  if not benches:
    raise MeasureError("median_benchmark needs at least one benchmark")
  first = benches[0]
  for b in benches[1:]:
    if ([d.device for d in b.devices] != [d.device for d in first.devices]
        or [(l.src, l.dst) for l in b.links]
        != [(l.src, l.dst) for l in first.links]):
      raise MeasureError("median_benchmark: the benchmarks measured "
                         "different devices or links; combine only "
                         "benchmarks of one cluster")

  def median_of(items):
    """`items[0]` with each float field, and each figure of a mapping of
    floats (the launch kinds all measured), the median over `items`."""
    changes = {}
    for f in dataclasses.fields(items[0]):
      first = getattr(items[0], f.name)
      if isinstance(first, float):
        changes[f.name] = statistics.median(getattr(x, f.name) for x in items)
      elif isinstance(first, Mapping):
        keys = set(first).intersection(*(getattr(x, f.name) for x in items))
        changes[f.name] = {k: statistics.median(getattr(x, f.name)[k]
                                                for x in items)
                           for k in first if k in keys}
    return dataclasses.replace(items[0], **changes)

  return ClusterBenchmark(
      devices=tuple(median_of([b.devices[i] for b in benches])
                    for i in range(len(first.devices))),
      links=tuple(median_of([b.links[i] for b in benches])
                  for i in range(len(first.links))),
      empty_step_s=statistics.median(b.empty_step_s for b in benches))


def link_kinds(cluster: Cluster) -> Dict[Tuple[str, str], str]:
  """(src, dst) -> the kind of the cluster's own link between them, both
  ways; pairs without one (absent) use the default link."""
  kinds = {}
  for link in cluster.links:
    kinds[(link.src, link.dst)] = kinds[(link.dst, link.src)] = link.kind
  return kinds


def _median_per_end(links: Sequence[LinkBenchmark],
                    field: str) -> Dict[str, float]:
  """Device -> median of a per-end host cost (`message_overhead_s`,
  `host_byte_s`) over the pairs it is part of."""
  costs: Dict[str, List[float]] = {}
  for l in links:
    for end in (l.src, l.dst):
      costs.setdefault(end, []).append(getattr(l, field))
  return {d: float(np.median(c)) for d, c in costs.items()}


def check_physical(result: ClusterBenchmark) -> None:
  """Raises MeasureError unless every figure is finite, rates and step
  times positive, overheads and latencies >= 0."""
  def bad(what, value, allow_zero):
    ok = np.isfinite(value) and (value >= 0 if allow_zero else value > 0)
    if not ok:
      raise MeasureError(f"cluster benchmark: {what} = {value} is not "
                         "physical")
  for d in result.devices:
    for field in ("matmul_flops", "conv_flops", "copy_bandwidth",
                  "empty_step_s"):
      bad(f"{d.device} {field}", getattr(d, field), False)
    bad(f"{d.device} op_overhead_s", d.op_overhead_s, True)
    bad(f"{d.device} traced_op_s", d.traced_op_s, True)
    bad(f"{d.device} conv_lanes", d.conv_lanes, True)
    bad(f"{d.device} random_uniform_rate", d.random_uniform_rate, True)
    bad(f"{d.device} random_normal_rate", d.random_normal_rate, True)
    for kind, seconds in d.launch_s.items():
      bad(f"{d.device} launch_s[{kind}]", seconds, True)
  for l in result.links:
    bad(f"{l.src}->{l.dst} bandwidth", l.bandwidth, False)
    bad(f"{l.src}->{l.dst} latency_s", l.latency_s, True)
    bad(f"{l.src}->{l.dst} message_overhead_s", l.message_overhead_s, True)
    bad(f"{l.src}->{l.dst} host_byte_s", l.host_byte_s, True)
  bad("empty_step_s", result.empty_step_s, False)


def benchmark_cluster(cluster: Cluster, config: MeasureConfig,
                      bench: BenchmarkConfig = BenchmarkConfig(),
                      progress: bool = True) -> ClusterBenchmark:
  """Runs the microbenchmarks on the servers behind `config.target`.

  Args:
    cluster: the cluster of the running servers (its devices are measured).
    config: the session target, warmup and timed runs (the median is used)
      of each measured graph, deadlines.
    bench: the microbenchmark sizes.
    progress: show a tqdm bar.

  Returns:
    The measured figures.

  Raises:
    MeasureError: a run failed (a transient failure, such as gRPC's
      "request received twice", twice in a row), or a figure came out not
      physical.
  """
  from tfplace.measurement import cluster_benchmark_graphs as graphs
  logical_cpus = [n for n in cluster.device_names
                  if n.startswith("/job:localhost/")
                  and device_type_of(n) == "CPU"]
  if not config.remote and len(logical_cpus) > 1:
    raise MeasureError(
        f"cluster {cluster.name!r} has several logical CPUs of this process: "
        "they share its memory and cores, so a tensor between them is not "
        "copied and their links cannot be measured; benchmark TF server "
        "workers (--local_workers N, `tfplace cluster up`) or this "
        "process's CPU and GPUs (the cluster `local`)")
  built = graphs.build(cluster.device_names, bench)
  try:
    return _benchmark_once(cluster, config, built, progress)
  except TransientRunError as e:
    first = str(e)
  logging.warning("cluster benchmark failed (%s); running it once more",
                  first)
  try:
    return _benchmark_once(cluster, config, built, progress)
  except TransientRunError as e:
    raise MeasureError(f"the cluster benchmark failed twice: first {first}; "
                       f"then {e}; check that the workers are up (`tfplace "
                       f"cluster up` state file, or the servers of the "
                       f"cluster spec) and run it again") from None


def _benchmark_once(cluster: Cluster, config: MeasureConfig, built,
                    progress: bool) -> ClusterBenchmark:
  """One benchmark of every device and pair, in a fresh session."""
  names = cluster.device_names
  pairs = [(a, b) for a in names for b in names if a != b]
  # In process: one CPU (`benchmark_cluster` refuses logical ones) and
  # the GPUs, which every session sees.
  with StepSession(built.graph.as_graph_def(), StepFetches(),
                   config=config) as session:
    runner = BenchmarkRunner(session, config)
    with tqdm(total=len(names) + len(pairs) + 1, desc="cluster benchmark",
              disable=not progress) as bar:
      devices = {}
      for name in names:
        devices[name] = _benchmark_device(runner, name, built.devices[name])
        bar.update()
      links = []
      for a, b in pairs:
        tiny = (devices[a].op_overhead_s + devices[b].op_overhead_s) / 2
        links.append(_benchmark_link(runner, a, b, built.pairs[(a, b)],
                                     tiny))
        bar.update()
      empty_all = runner.median(built.empty_all)
      bar.update()
  result = ClusterBenchmark(devices=tuple(devices[n] for n in names),
                            links=tuple(links), empty_step_s=empty_all)
  check_physical(result)
  logging.info("cluster benchmark:\n%s", result.describe())
  return result


class BenchmarkRunner:
  """Median step times and traced op durations of fetches in one session
  (`what` names the benchmark in errors)."""

  def __init__(self, session: StepSession, config: MeasureConfig,
               what: str = "the cluster benchmark"):
    self.session = session
    self.config = config
    self.what = what

  def _run(self, fetch: Sequence[str], trace: bool = False):
    import tensorflow as tf
    metadata = tf.compat.v1.RunMetadata() if trace else None
    options = self.session.run_options(trace)
    with tf_errors(self.what):
      start = time.perf_counter()
      self.session.session.run(list(fetch), options=options,
                               run_metadata=metadata)
      return time.perf_counter() - start, metadata

  def median(self, fetch: Sequence[str]) -> float:
    """Median seconds of 2 x `config.steps` runs (at least `MIN_RUNS`) after
    `config.warmup` (at least one)."""
    for _ in range(max(1, self.config.warmup)):
      self._run(fetch)
    runs = max(MIN_RUNS, 2 * self.config.steps)
    return statistics.median(self._run(fetch)[0] for _ in range(runs))

  def median_difference(self, fetch_a: Sequence[str],
                        fetch_b: Sequence[str]) -> float:
    """Median over `PAIRED_RUNS_FACTOR` x 2 x `config.steps` (at least
    `MIN_RUNS`) back-to-back pairs of (seconds of a - seconds of b), each
    pair's order alternating: the machine's drift cancels within a pair,
    so the difference is far steadier than a difference of two medians."""
    for _ in range(max(1, self.config.warmup)):
      self._run(fetch_a)
      self._run(fetch_b)
    runs = PAIRED_RUNS_FACTOR * max(MIN_RUNS, 2 * self.config.steps)
    deltas = []
    for k in range(runs):
      if k % 2:
        b = self._run(fetch_b)[0]
        a = self._run(fetch_a)[0]
      else:
        a = self._run(fetch_a)[0]
        b = self._run(fetch_b)[0]
      deltas.append(a - b)
    return statistics.median(deltas)

  def peak_above_outputs(self, fetch: Sequence[str], op: str) -> int:
    """Bytes `op` held at its peak beyond its outputs, in a FULL_TRACE run
    (the allocator's `peak_bytes` of its node)."""
    self._run(fetch)
    _, metadata = self._run(fetch, trace=True)
    for dev in metadata.step_stats.dev_stats:
      for node in dev.node_stats:
        if node.node_name == op:
          outputs = sum(o.tensor_description.allocation_description
                        .allocated_bytes for o in node.output)
          return int(sum(m.peak_bytes for m in node.memory) - outputs)
    raise MeasureError(f"the traced run recorded no {op}")

  def durations(self, fetch: Sequence[str], ops: Sequence[str],
                runs: int = 3) -> List[List[float]]:
    """Traced durations (seconds) of `ops`, one list per FULL_TRACE run."""
    self._run(fetch)
    wanted = set(ops)
    out = []
    for _ in range(runs):
      _, metadata = self._run(fetch, trace=True)
      out.append([r.duration_s for r in op_records(metadata.step_stats)
                  if r.name in wanted])
      if not out[-1]:
        raise MeasureError(f"the traced run recorded none of "
                           f"{sorted(wanted)[:3]}")
    return out


def _benchmark_device(runner: "BenchmarkRunner", name: str,
                      g) -> DeviceBenchmark:
  """The figures of one device from its part of the graph."""
  empty = runner.median(g.empty)
  per_op = runner.median_difference(g.tiny, g.empty) / len(g.tiny_ops)
  # Per traced run the mean (durations are whole microseconds), then the
  # smallest: the tracer's cost only grows when something else runs.
  traced_tiny = min(statistics.mean(run) for run in
                    runner.durations(g.tiny, g.tiny_ops))
  matmul = _median_of_runs(runner.durations(g.matmul, g.matmul_ops))
  conv = _median_of_runs(runner.durations(g.conv, g.conv_ops))
  lanes = 0.0
  if device_type_of(name) == "CPU":
    # The narrow convolutions take as long as `lanes` output channels
    # would: lanes = channels x their time / the full convolutions' time,
    # within [narrow channels, channels]. Not on accelerators: there
    # convolutions this small are bound by the kernel launch, and the
    # ratio would measure that.
    narrow = _median_of_runs(runner.durations(g.narrow, g.narrow_ops))
    channels = g.narrow_channels * g.conv_flops / g.narrow_flops
    lanes = float(np.clip(channels * _tick(narrow) / _tick(conv),
                          g.narrow_channels, channels))
  copy = _median_of_runs(runner.durations(g.copy, g.copy_ops))
  uniform = _median_of_runs(runner.durations(g.uniform, g.uniform_ops))
  normal = _median_of_runs(runner.durations(g.normal, g.normal_ops))
  buffers = None
  if g.conv_grad_op:
    buffers = (runner.peak_above_outputs((g.conv_grad_op,), g.conv_grad_op)
               >= g.conv_grad_buffer / 2)
  launch = {}
  if g.launch:
    launch[ELEMENTWISE] = max(0.0, per_op)
    for kind, (fetch, ops) in g.launch.items():
      launch[kind] = max(0.0, runner.median_difference(fetch, g.empty)
                         / len(ops))
  return DeviceBenchmark(
      device=name, matmul_flops=g.matmul_flops / _tick(matmul),
      conv_flops=g.conv_flops / _tick(conv),
      copy_bandwidth=g.copy_bytes / _tick(copy),
      op_overhead_s=max(0.0, per_op),
      traced_op_s=traced_tiny, empty_step_s=empty,
      conv_lanes=lanes, launch_s=launch,
      random_uniform_rate=g.random_values / _tick(uniform),
      random_normal_rate=g.random_values / _tick(normal),
      conv_grad_buffers=buffers)


def _median_of_runs(runs: List[List[float]]) -> float:
  return statistics.median(d for run in runs for d in run)


def _tick(seconds: float) -> float:
  """A traced duration, at least the tracer's 1 us resolution."""
  return max(seconds, 1e-6)


def _benchmark_link(runner: "BenchmarkRunner", a: str, b: str, g,
                    tiny_s: float) -> LinkBenchmark:
  """The figures of a -> b; `tiny_s`: the untraced time of a tiny op."""
  fan = runner.median_difference(g.fanout_many, g.fanout_one) / (
      g.messages - 1)
  hop = runner.median_difference(g.pingpong_long, g.pingpong_short) / (
      g.long_hops - g.short_hops)
  message = max(0.0, fan - tiny_s)
  latency = max(0.0, hop - tiny_s - 2 * message)
  return LinkBenchmark(src=a, dst=b, message_overhead_s=message,
                       latency_s=latency, bandwidth=1.0 / _bandwidth_slope(
                           runner, g), hop_s=max(0.0, hop))


def _bandwidth_slope(runner: BenchmarkRunner, g) -> float:
  """Seconds per byte of a -> b: least squares over the transfer sizes.

  Raises:
    MeasureError: the time does not grow with size.
  """
  sizes, deltas = [], []
  for nbytes, (split, local) in g.transfers.items():
    sizes.append(float(nbytes))
    deltas.append(runner.median_difference(split, local))
  n, t = np.array(sizes), np.array(deltas)
  slope = float(np.polyfit(n, t, 1)[0]) if len(n) > 1 else 0.0
  if not slope > 0:
    raise MeasureError("the transfer time does not grow with the tensor "
                       f"size ({dict(zip(sizes, deltas))}); the machine is "
                       "too noisy or the sizes too small")
  return slope
