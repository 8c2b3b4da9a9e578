"""What a measurement gives: step time statistics and the traced op records.

`StepTiming` holds the timed steps of one placement, the ops of its traced
step (`OpRecord`: device, start, duration, read from `RunMetadata.step_stats`),
the nodes its While loops ran (`LoopOpRecord`, summed over their executions)
and whether they ran where placed (`DeviceMismatch`).
"""

import collections
import dataclasses
import json
import re
import statistics
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from tfplace.errors import MeasureError
from tfplace.graph.lowered_loops import loop_of
from tfplace.io_utils import atomic_write

# The traced step's step stats in a trace directory (read by tfplace.trace).
STEP_STATS_FILE = "step_stats.pb"
# "name = Type(inputs)": a node's timeline label.
_LABEL_OP_TYPE = re.compile(r"(\S+) = ([\w.>-]+)\(")


@dataclasses.dataclass(frozen=True)
class OpRecord:
  """One op execution from the traced step.

  Attributes:
    name: node name.
    device: full device string it ran on.
    start_s: start, seconds after the first op of the step started.
    duration_s: wall time from start to end of all its work (on a GPU the
      longer of its launch on the host and `kernel_s`).
    kernel_s: on a GPU whose tracer recorded the kernels, the op's kernel
      time (the sum of its kernels on the device's streams); else None.
  """
  name: str
  device: str
  start_s: float
  duration_s: float
  kernel_s: Optional[float] = None


@dataclasses.dataclass(frozen=True)
class LoopOpRecord:
  """The executions of one node of a lowered While loop in the traced step
  (`tfplace.graph.lowered_loops`).

  Attributes:
    name: the node's name in the lowered step ("<While>/body/_1/MatMul").
    loop: the name of the While op (in the graph) that ran it.
    op_type: its type as traced (a kernel's name, such as "_MklMatMul").
    device: full device string it ran on.
    executions: how many times it ran in the step.
    total_s: the sum of their durations.
  """
  name: str
  loop: str
  op_type: str
  device: str
  executions: int
  total_s: float


@dataclasses.dataclass(frozen=True)
class DeviceMismatch:
  """An op that ran somewhere other than where the placement put it."""
  op: str
  placed: str
  ran: str


@dataclasses.dataclass(frozen=True)
class InputSource:
  """Where the values of one graph input came from during a measurement.

  Attributes:
    name: the placeholder (or input pipeline op) name.
    source: "synthetic", "user" or "pipeline" (an in-graph tf.data iterator
      or queue, initialized before timing).
    dtype: the fed dtype name ("" for a pipeline).
    shape: the fed shape (() for a pipeline).
    how: how the values were made, e.g. "uniform integers in [0, 10): the
      classes of the logits of 'xent'".
  """
  name: str
  source: str
  dtype: str = ""
  shape: Tuple[int, ...] = ()
  how: str = ""

  def describe(self) -> str:
    """One line, e.g. "labels int32[16] synthetic: uniform in [0, 10) ..."."""
    if self.source == "pipeline":
      return f"{self.name}: in-graph input pipeline ({self.how})"
    shape = ",".join(str(d) for d in self.shape)
    return f"{self.name} {self.dtype}[{shape}] {self.source}: {self.how}"


def describe_inputs(inputs: Sequence[InputSource]) -> str:
  """Where a measurement's inputs came from, on one line."""
  if not inputs:
    return "made in the graph (no feeds, no input pipeline)"
  return "; ".join(s.describe() for s in inputs)


@dataclasses.dataclass(frozen=True)
class StepTiming:
  """Measured step times of one placement.

  Attributes:
    median_step_time_s: median of the timed steps.
    min_step_time_s: fastest timed step.
    max_step_time_s: slowest timed step.
    stdev_s: sample standard deviation (0 for one step).
    iqr_s: interquartile range of the timed steps.
    step_times_s: every timed step, in order.
    op_records: graph ops of the traced step (runtime nodes left out).
    loop_records: the nodes the step's While loops ran (`loop_op_records`).
    devices_match: True if every traced graph op ran on its placed device.
    mismatches: the ops that did not.
    trace_path: directory with the profiler trace and step_stats.pb, if any.
    target: the session target ("" for in process).
    profile_error: why the TF profiler trace is missing or incomplete (None
      when it was captured, or not asked for).
    loss: the loss of the last step run (None if the graph names no loss).
    inputs: where each fed or pipelined input came from (empty: the graph
      makes its own inputs).
    peak_memory_bytes: device -> the most bytes its allocator held during
      the traced step (`peak_memory`); empty where no allocator kept
      statistics. In process, the CPUs' peak leaves out what the process's
      CPU allocator held before the session opened (its own tensors:
      `process_cpu_bytes`).
    process_cpu_bytes: in process, the bytes the CPU allocator held before
      the session opened (0 on a server target, or without statistics).
    memory_unrecorded: placed device -> why it has no peak though others
      have one (`memory_unrecorded`): its ops allocated nothing during the
      step (only variables and their updates), its allocator kept no
      statistics, or no op of the step ran there.
  """
  median_step_time_s: float
  min_step_time_s: float
  max_step_time_s: float
  stdev_s: float
  iqr_s: float
  step_times_s: Tuple[float, ...]
  op_records: Tuple[OpRecord, ...] = ()
  devices_match: bool = True
  mismatches: Tuple[DeviceMismatch, ...] = ()
  trace_path: Optional[str] = None
  target: str = ""
  profile_error: Optional[str] = None
  loss: Optional[float] = None
  inputs: Tuple[InputSource, ...] = ()
  peak_memory_bytes: Mapping[str, int] = dataclasses.field(
      default_factory=dict)
  process_cpu_bytes: int = 0
  memory_unrecorded: Mapping[str, str] = dataclasses.field(
      default_factory=dict)
  loop_records: Tuple[LoopOpRecord, ...] = ()

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)

  @classmethod
  def from_dict(cls, data: dict) -> "StepTiming":
    data = dict(data)
    data["step_times_s"] = tuple(data["step_times_s"])
    data["op_records"] = tuple(merge_stream_records(
        [OpRecord(**r) for r in data.get("op_records", ())]))
    data["loop_records"] = tuple(
        LoopOpRecord(**r) for r in data.get("loop_records", ()))
    data["mismatches"] = tuple(
        DeviceMismatch(**m) for m in data.get("mismatches", ()))
    data["inputs"] = tuple(
        InputSource(**dict(i, shape=tuple(i.get("shape", ()))))
        for i in data.get("inputs", ()))
    return cls(**data)


def timing_from_steps(step_times: Sequence[float], **fields) -> StepTiming:
  """Builds a `StepTiming` with the statistics of `step_times`."""
  t = np.asarray(step_times, dtype=np.float64)
  if t.size == 0:
    raise MeasureError("no step was timed")
  q1, q3 = np.percentile(t, [25, 75])
  return StepTiming(
      median_step_time_s=float(np.median(t)), min_step_time_s=float(t.min()),
      max_step_time_s=float(t.max()),
      stdev_s=float(statistics.stdev(t)) if t.size > 1 else 0.0,
      iqr_s=float(q3 - q1), step_times_s=tuple(float(x) for x in t), **fields)


def _is_runtime_node(name: str) -> bool:
  """Nodes TF adds at run time (_SOURCE, _SINK, _Send/_Recv, _retval, _arg,
  "x/ctrl/_12"): their last name part starts with an underscore."""
  return not name or name.rsplit("/", 1)[-1].startswith("_")


def _device_name(name: str) -> str:
  """Strips suffixes such as "/stream:all" or "/memcpy" some runtimes add."""
  parts = name.split("/")
  keep = [p for p in parts if not p.startswith("stream:") and p != "memcpy"]
  return "/".join(keep).split(" ")[0]


def _full_names(devices: Iterable[str]) -> Dict[str, str]:
  """Short device names ("/device:GPU:0", as the GPU tracer names its
  streams) -> the one full name among `devices` that ends with it."""
  full = [d for d in devices if d.startswith("/job:")]
  out = {}
  for short in {d for d in devices if not d.startswith("/job:")}:
    matches = [d for d in full if d.endswith(short)]
    if len(matches) == 1:
      out[short] = matches[0]
  return out


def merge_stream_records(records: Sequence[OpRecord]) -> List[OpRecord]:
  """`records` with each GPU kernel record (on a short device name,
  "/device:GPU:0") merged into its op's record on the full device name:
  one record per op and device, lasting the longer of the two, with the
  kernel's duration as `kernel_s`. On a GPU the executor's record is the
  op's launch on the host and the stream's its kernels; the op holds the
  device for the longer (launches and kernels overlap in a pipeline).
  Records of files written before `kernel_s` (the op's longest kernel on
  the short name) merge the same way; records with nothing to merge come
  back as they were."""
  aliases = _full_names({r.device for r in records})
  if not aliases:
    return list(records)
  kernels = {(r.name, aliases[r.device]): r for r in records
             if r.device in aliases}
  hosts = {(r.name, r.device) for r in records if r.device not in aliases}
  out = []
  for r in records:
    if r.device in aliases:
      if (r.name, aliases[r.device]) not in hosts:  # No launch record.
        out.append(dataclasses.replace(r, device=aliases[r.device],
                                       kernel_s=r.duration_s))
      continue
    kernel = kernels.get((r.name, r.device))
    if kernel is None:
      out.append(r)
      continue
    longer = kernel if kernel.duration_s > r.duration_s else r
    out.append(OpRecord(r.name, r.device, longer.start_s, longer.duration_s,
                        kernel.duration_s))
  return sorted(out, key=lambda r: (r.start_s, r.name))


def peak_memory(step_stats) -> Dict[str, int]:
  """Device -> the most bytes its memory allocator held in `step_stats`.

  Each traced op's `AllocatorMemoryUsed.allocator_bytes_in_use` is a
  snapshot of its allocator's live bytes (variables included) after the
  op's last allocation. That misses scratch an op frees before its last
  allocation (a CPU filter gradient's 32 MiB buffer, measured, while its
  snapshot showed 1 MiB), so each op also counts the bytes in use before
  it (the snapshot less its `live_bytes`) plus its own `peak_bytes`; the
  step's peak is the largest of these. A GPU device counts its own allocator
  ("GPU_0_bfc"), any other device its host allocator. Only allocators that
  keep statistics fill the snapshot: TF's GPU allocator does, its default
  CPU allocator does not (set ``TF_CPU_ALLOCATOR_USE_BFC=true`` before TF
  starts; `LocalCluster` workers do). The logical CPU devices of one
  process share one allocator, so each shows the process's peak.
  """
  peaks: Dict[str, int] = {}
  for dev in step_stats.dev_stats:
    if "/stream:" in dev.device or dev.device.endswith("/memcpy"):
      continue
    device = _device_name(dev.device)
    on_gpu = "GPU:" in device.upper()
    for node in dev.node_stats:
      for used in node.memory:
        if _is_gpu_allocator(used.allocator_name) != on_gpu:
          continue
        in_use = used.allocator_bytes_in_use
        if in_use <= 0:
          continue  # No statistics: no peak rather than 0 bytes.
        during = in_use - used.live_bytes + used.peak_bytes
        peaks[device] = int(max(peaks.get(device, 0), in_use, during))
  return peaks


NO_ALLOCATION = "no allocation recorded: its ops allocated nothing in the step"
NO_STATISTICS = "its allocator kept no statistics"
NOT_RUN = "no op of the step ran there"


def memory_unrecorded(step_stats, devices: Iterable[str],
                      peaks: Mapping[str, int]) -> Dict[str, str]:
  """Device -> why it has no peak in `peaks`, for each of `devices` (the
  placed ones, full names) that has none while another device has one.

  TF snapshots an allocator only when an op allocates through it: a device
  whose ops only hold variables and update them in place (a parameter
  server's `ResourceApplyGradientDescent`) records nothing during the step
  (`NO_ALLOCATION`). A CPU that shares its task's allocator with a CPU
  that has a peak is covered by that peak (`peak_memory`).
  """
  if not peaks:
    return {}  # Nothing measured anywhere: the caller says why once.
  entries: Dict[str, List[bool]] = {}  # device -> [ran an op, had memory]
  for dev in step_stats.dev_stats:
    if "/stream:" in dev.device or dev.device.endswith("/memcpy"):
      continue
    seen = entries.setdefault(_device_name(dev.device), [False, False])
    for node in dev.node_stats:
      seen[0] = seen[0] or not _is_runtime_node(node.node_name)
      seen[1] = seen[1] or bool(node.memory)
  tasks_measured = {cpu_task(d) for d in peaks} - {None}
  out = {}
  for device in sorted(set(devices) - set(peaks)):
    if cpu_task(device) in tasks_measured:
      continue
    ran, had_memory = entries.get(device, (False, False))
    out[device] = (NO_STATISTICS if had_memory else
                   NO_ALLOCATION if ran else NOT_RUN)
  return out


def cpu_task(device: str) -> Optional[str]:
  """"/job:w/replica:0/task:1" for a CPU device of that task, else None."""
  task, _, kind = device.rpartition("/device:")
  return task if kind.upper().startswith("CPU") else None


def without_held(peaks: Mapping[str, int], cpu_held: int) -> Dict[str, int]:
  """`peaks` less `cpu_held` on every CPU device (an in-process session's
  CPUs share the allocator with what the process held before it opened)."""
  return {device: max(0, nbytes - cpu_held)
          if device.rpartition("/device:")[2].upper().startswith("CPU")
          else nbytes for device, nbytes in peaks.items()}


def _is_gpu_allocator(name: str) -> bool:
  """"GPU_0_bfc" holds device memory; "gpu_host_bfc", "cuda_host_bfc",
  "cpu", "mklcpu" and "bfc_cpu_allocator_for_gpu" hold host memory."""
  name = name.upper()
  return name.startswith("GPU") and "HOST" not in name


def op_records(step_stats, graph=None) -> List[OpRecord]:
  """Graph op executions in `step_stats`, times relative to the step start.

  Args:
    step_stats: a `StepStats` proto (`RunMetadata.step_stats`).
    graph: if given, an `OpGraph`; ops not in it are left out.

  A node listed on several dev_stats entries (the master and the worker of a
  remote task) is kept once, with its longest duration. A GPU op's kernels
  (the tracer's "/device:GPU:0/stream:all" records, several for one op:
  a convolution runs 2-6 kernels) are summed into its `kernel_s` and its
  record lasts the longer of its launch and its kernels
  (`merge_stream_records`); the per-stream and copy records repeat them and
  are left out.
  """
  raw: Dict[Tuple[str, str], Tuple[int, int]] = {}
  kernels: Dict[Tuple[str, str], Tuple[int, int]] = {}
  for dev in step_stats.dev_stats:
    device = _device_name(dev.device)
    streams = dev.device.endswith("/stream:all")
    if not streams and ("/stream:" in dev.device
                        or dev.device.endswith("/memcpy")):
      continue  # They repeat stream:all's kernels, or are copies.
    for node in dev.node_stats:
      name = node.node_name.split(":")[0]
      if _is_runtime_node(name):
        continue
      if graph is not None and name not in graph.index:
        continue
      key = (name, device)
      start, dur = node.all_start_micros, node.all_end_rel_micros
      if streams:
        first, total = kernels.get(key, (start, 0))
        kernels[key] = (min(first, start), total + dur)
      elif key not in raw or dur > raw[key][1]:
        raw[key] = (start, dur)
  raw.update(kernels)
  if not raw:
    return []
  t0 = min(s for s, _ in raw.values())
  merged = merge_stream_records(
      [OpRecord(name=n, device=d, start_s=(s - t0) * 1e-6,
                duration_s=max(0, dur) * 1e-6)
       for (n, d), (s, dur) in raw.items()])
  return sorted(merged, key=lambda r: (r.start_s, r.name))


def label_op_type(label: str) -> Optional[str]:
  """The op type a node's timeline label names ("x = MatMul(a, b)" ->
  "MatMul"; a kernel's own name, such as "_MklMatMul", as it stands), or
  None where it names none."""
  m = _LABEL_OP_TYPE.search(label)
  return m.group(2) if m else None


def loop_op_records(step_stats, graph) -> List[LoopOpRecord]:
  """The nodes that the lowered While loops of `graph` (an `OpGraph`) ran
  in `step_stats`, each with its executions and their summed durations.

  A node listed on several dev_stats entries (the master and the worker of
  a remote task) is kept from the entry where it ran longest in all; GPU
  stream records are left out (a loop's kernels are not told apart).
  """
  loops = {op.name: op for op in graph.ops
           if op.body is not None and op.body.trip_count is not None}
  if not loops:
    return []
  best: Dict[Tuple[str, str], LoopOpRecord] = {}
  for dev in step_stats.dev_stats:
    if "/stream:" in dev.device or dev.device.endswith("/memcpy"):
      continue
    device = _device_name(dev.device)
    runs = collections.defaultdict(lambda: [0, 0.0])
    types = {}
    for node in dev.node_stats:
      name = node.node_name.split(":")[0]
      if name in graph.index:
        continue
      op_type = label_op_type(node.timeline_label)
      if op_type is None:
        continue
      runs[name][0] += 1
      runs[name][1] += max(0, node.all_end_rel_micros) * 1e-6
      types[name] = op_type
    for name, (count, total) in runs.items():
      loop = loop_of(name, loops)
      if loop is None or types[name].startswith(("_Send", "_Recv",
                                                  "_HostSend", "_HostRecv")):
        continue
      key = (name, device)
      if key not in best or total > best[key].total_s:
        best[key] = LoopOpRecord(name, loop, types[name], device, count,
                                 total)
  return sorted(best.values(), key=lambda r: (r.loop, r.name, r.device))


def device_mismatches(records: Sequence[OpRecord],
                      placement) -> List[DeviceMismatch]:
  """Ops whose traced device differs from the placed device (`placement`:
  a `tfplace.placement.Placement`)."""
  import tensorflow as tf
  out = []
  for r in records:
    placed = placement.devices.get(r.name)
    if placed is None:
      continue
    a, b = tf.DeviceSpec.from_string(placed), tf.DeviceSpec.from_string(r.device)
    same = ((a.job or "localhost") == (b.job or "localhost")
            and (a.task or 0) == (b.task or 0)
            and (a.device_type or "").upper() == (b.device_type or "").upper()
            and (a.device_index or 0) == (b.device_index or 0))
    if not same:
      out.append(DeviceMismatch(op=r.name, placed=placed, ran=r.device))
  return out


def save_timing(timing: StepTiming, path: str) -> None:
  """Writes a StepTiming as JSON (atomically)."""
  atomic_write(path, json.dumps(timing.to_dict(), indent=1))
