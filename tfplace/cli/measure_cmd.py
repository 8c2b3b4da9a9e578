"""time real training steps of a placement.

usage: tfplace measure GRAPH --placement placement.json
         [--local_workers N [--cores_per_worker C] [--worker_gpus 0,none]
          | --cluster STATE_OR_SPEC | --target grpc://...]
         [--warmup 2] [--steps 10] [--timeout_s 300] [--step_timeout_s 120]
         [--feeds FILE.npz] [--batch_size N] [--input_shapes name=DxD,...]
         [--index_ranges name=N,...] [--trace_dir DIR] [--json]

GRAPH is a graph file (any form `import_graph` reads) or a benchmark model
name (`mlp_towers`, `small_cnn`, ...). Without a cluster option the steps run
in this process on logical CPU devices (/job:localhost/.../CPU:i) and this
machine's GPUs (/job:localhost/.../GPU:i; e.g. placed on `--cluster local`).
--local_workers N starts N pinned TF server processes for the run
(devices /job:worker/replica:0/task:i/device:CPU:0; --cores_per_worker C,
and on a GPU machine --worker_gpus 0,none adds .../task:0/device:GPU:0, as
for `tfplace cluster up`) and stops them after;
--cluster takes the state file of `tfplace cluster up` or a cluster spec
({"worker": ["host:port", ...]}, inline or a file); --target names a server
(--target local: this process, as without a cluster option).

A graph whose inputs are placeholders gets synthetic values (or the arrays of
--feeds FILE.npz); tf.data iterators and queues in the graph are initialized
before timing. The output says where each input came from.
"""

import json
import os
import sys
from typing import List, Optional

from absl import flags

from tfplace.cli import input_flags, local_workers_flags, measure_flags
from tfplace.cli.run_helpers import (exit_now_if_tf_busy, load_graph_or_model,
                                     native_stdout_to_stderr,
                                     servers_from_cluster_arg)
from tfplace.device_names import canonical_device
from tfplace.errors import TfplaceError
from tfplace.io_utils import check_out_dir
from tfplace.measurement.local_cluster import CPU_BFC_ENV
from tfplace.measurement.timing import cpu_task
from tfplace.units import format_bytes

_PLACEMENT = flags.DEFINE_string("placement", None, "placement JSON file")
_CLUSTER = flags.DEFINE_string(
    "cluster", None, "`tfplace cluster up` state file, or a cluster spec JSON "
    "(inline or file) of running TF servers")
_TARGET = flags.DEFINE_string(
    "target", "", "session target: grpc://host:port, or local (this process, "
    "the default)")
_TRACE_DIR = flags.DEFINE_string(
    "trace_dir", None, "write a TF profiler trace and step_stats.pb here (a "
    "new or empty folder)")
_JSON = flags.DEFINE_bool("json", False, "print the result as one JSON object")
flags.adopt_module_key_flags(measure_flags)
flags.adopt_module_key_flags(input_flags)
flags.adopt_module_key_flags(local_workers_flags)


def main(argv: List[str]) -> None:
  """Runs `tfplace measure`; see the module docstring."""
  # Before TF first needs CPU memory: the allocator that keeps statistics.
  os.environ.setdefault(CPU_BFC_ENV, "true")
  from tfplace.placement import Placement
  if len(argv) != 2:
    raise TfplaceError("expected exactly one GRAPH argument: tfplace measure "
                       "GRAPH --placement placement.json")
  if not _PLACEMENT.value:
    raise TfplaceError("--placement is required")
  chosen = [local_workers_flags.requested(), bool(_CLUSTER.value),
            bool(_TARGET.value)]
  if sum(chosen) > 1:
    raise TfplaceError("use at most one of --local_workers, --cluster, "
                       "--target")
  local_workers_flags.check()
  measure_flags.measure_config("")  # bad values fail before any work
  if _TRACE_DIR.value:
    check_out_dir(_TRACE_DIR.value, "--trace_dir")
  placement = Placement.load(_PLACEMENT.value)
  graph = load_graph_or_model(argv[1], **input_flags.import_kwargs())
  inputs = measure_flags.step_inputs(graph)
  try:
    with native_stdout_to_stderr():
      timing = _run(graph, placement, inputs)
  except TfplaceError as e:
    exit_now_if_tf_busy("measure", e)
    raise
  _report(timing, inputs, placement)


def _run(graph, placement, inputs):
  if local_workers_flags.requested():
    with local_workers_flags.local_cluster() as lc:
      return _measure(graph, placement, inputs, lc.target, lc.addresses,
                      lc.profiler_addresses)
  if _CLUSTER.value:
    remote, profilers = servers_from_cluster_arg(_CLUSTER.value)
    return _measure(graph, placement, inputs, remote.target,
                    remote.addresses, profilers)
  return _measure(graph, placement, inputs, _TARGET.value)


def _measure(graph, placement, inputs, target: str, workers=(),
             profiler_addresses: Optional[List[str]] = None):
  from tfplace.measurement.runner import measure
  return measure(graph, placement,
                 measure_flags.measure_config(target, workers),
                 trace_dir=_TRACE_DIR.value,
                 profiler_addresses=profiler_addresses, feeds=inputs)


def _memory_line(peaks, predicted, unrecorded=None, placed=()) -> str:
  """The measured peak memory per device beside the placement's simulated
  one (`predicted`, from its metadata), or why there is none. The CPUs of
  one process share its allocator: where several of a task's CPUs have a
  peak or are `placed` (full names), they are shown once, together. A
  placed device without a peak of its own is listed with why
  (`unrecorded`: `StepTiming.memory_unrecorded`)."""
  if not peaks:
    return ("peak memory not measured: TF's CPU allocator kept no "
            f"statistics (set {CPU_BFC_ENV}=true before TF starts)")
  cpus = [cpu_task(d) for d in set(peaks) | set(placed)]
  shown = {}
  for device, nbytes in peaks.items():
    task = cpu_task(device)
    if task is not None and cpus.count(task) > 1:
      device = f"{task} CPUs (one allocator)"
    shown[device] = max(shown.get(device, 0), nbytes)
  parts = {device: format_bytes(nbytes) + (
      f" (simulated {format_bytes(predicted[device])})"
      if device in predicted else "") for device, nbytes in shown.items()}
  for device, why in (unrecorded or {}).items():
    parts[device] = f"({why}" + (
        f"; simulated {format_bytes(predicted[device])})"
        if device in predicted else ")")
  return "peak memory: " + ", ".join(
      f"{device} {text}" for device, text in sorted(parts.items()))


def _report(timing, inputs, placement) -> None:
  if _JSON.value:
    out = timing.to_dict()
    out.pop("op_records")
    out["num_op_records"] = len(timing.op_records)
    sys.stdout.write(json.dumps(out) + "\n")
    return
  sys.stdout.write(
      f"median step time {timing.median_step_time_s * 1e3:.3f} ms "
      f"(min {timing.min_step_time_s * 1e3:.3f}, max "
      f"{timing.max_step_time_s * 1e3:.3f}, IQR {timing.iqr_s * 1e3:.3f} ms, "
      f"{len(timing.step_times_s)} steps)\n")
  if timing.devices_match:
    sys.stdout.write(f"devices match the placement "
                     f"({len(timing.op_records)} ops traced)\n")
  else:
    sys.stdout.write(f"{len(timing.mismatches)} op(s) ran elsewhere, e.g. "
                     f"{timing.mismatches[0]}\n")
  sys.stdout.write(_memory_line(
      timing.peak_memory_bytes,
      placement.metadata.predicted_peak_memory_bytes,
      timing.memory_unrecorded,
      {canonical_device(d) for d in placement.devices.values()}) + "\n")
  if timing.process_cpu_bytes:
    sys.stdout.write(
        f"  (the CPUs' peak leaves out the "
        f"{format_bytes(timing.process_cpu_bytes)} this process held "
        "before the session: its own tensors, e.g. the imported model's "
        "weights)\n")
  if timing.trace_path:
    sys.stdout.write(f"trace written to {timing.trace_path}\n")
  sys.stdout.write("".join(f"{line}\n"
                           for line in measure_flags.input_lines(inputs)))
