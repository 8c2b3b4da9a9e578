"""measure a real cluster, fit the simulator to it and save the calibration.

usage: tfplace calibrate [GRAPH ...]
         (--local_workers N [--cores_per_worker C] [--worker_gpus 0,none]
          | --cluster STATE_OR_SPEC | --target grpc://... | --in_process)
         --out calibration.json [--suite default] [--steps 10] [--warmup 2]
         [--json]

On the cluster's TF servers it runs the microbenchmarks of
`tfplace.measurement.cluster_benchmark` (per device: matmul and convolution
FLOP/s, copy bandwidth, random values per second, per-op and empty-step
overheads; per pair of devices: per-message cost, latency, bandwidth)
three times, before, amid and after the calibration graphs' runs, and
keeps each figure's median (and prints how far the three differ, also
kept in the file: over x1.25 on any figure, the machine was not steady
while it calibrated, and predictions can be off by as much for that
reason alone; `simulate`/`place` then warn); it measures the calibration
graphs (each on every device alone, split in halves, and one random
split; the depthwise and attention graphs on each device alone) and fits, per
op type, its time from the traced op durations of the one-device runs
(within physical bounds), and from the split runs the share of the
per-message cost each end of a transfer pays and the share of the time per
byte that is host work (blocking the workers' compute). The calibration
graphs are the shipped suite (--suite: convolutions, depthwise
convolutions, Keras-style attention, matmuls, embeddings, element-wise chains;
`tfplace.models.calibration_suite`), or the
GRAPHs given (graph files, any form `import_graph` reads, or benchmark model
names; placeholders get synthetic values, or the --feeds arrays: give one
GRAPH with --feeds). The file (format tfplace.calibration/1) describes the cluster, for
any graph: `tfplace simulate/place --calibration` then report the share of
a graph's predicted op time on op types the calibration has not seen.

The error printed is in-sample (on the calibration runs); `scripts/
fidelity.py --cross` measures it on other graphs.

--local_workers N starts N pinned local TF server processes and stops them
after (--cores_per_worker C, and on a GPU machine --worker_gpus 0,none,
as for `tfplace cluster up`); --cluster takes the state file of `tfplace
cluster up` or a cluster spec ({"worker": ["host:port", ...]}, inline or a
file); --target names one
server, whose cluster's workers are listed from it. --in_process
calibrates this process's devices instead (the cluster preset `local`:
/cpu:0 with every core, and each GPU TF sees): on a GPU machine, CPU +
GPU; place with `--cluster local --calibration FILE` after.
"""

import dataclasses
import json
import math
import os
import sys
from typing import List, Tuple

from absl import flags
from absl import logging

from tfplace.cli import input_flags, local_workers_flags, measure_flags
from tfplace.cli.run_helpers import (exit_now_if_tf_busy, load_graph_or_model,
                                     native_stdout_to_stderr,
                                     servers_from_cluster_arg)
from tfplace.errors import TfplaceError
from tfplace.io_utils import check_out_path

_CLUSTER = flags.DEFINE_string(
    "cluster", None, "`tfplace cluster up` state file, or a cluster spec JSON "
    "(inline or file) of running TF servers")
_TARGET = flags.DEFINE_string("target", "", "session target, grpc://host:port")
_IN_PROCESS = flags.DEFINE_bool(
    "in_process", False, "calibrate this process's CPU and GPUs (the cluster "
    "preset `local`) instead of TF servers")
_OUT = flags.DEFINE_string("out", None, "calibration JSON file to write")
_SUITE = flags.DEFINE_string(
    "suite", "default", "the calibration suite measured when no GRAPH is "
    "given (tfplace.models.calibration_suite.SUITES: default, tiny)")
_JSON = flags.DEFINE_bool("json", False, "print the result as one JSON object")
flags.adopt_module_key_flags(measure_flags)
flags.adopt_module_key_flags(input_flags)
flags.adopt_module_key_flags(local_workers_flags)


def main(argv: List[str]) -> None:
  """Runs `tfplace calibrate`; see the module docstring."""
  _check_flags()
  check_out_path(_OUT.value, inputs=[*argv[1:], _CLUSTER.value])
  servers = None
  if _CLUSTER.value:  # A bad or stale --cluster fails before the suite builds.
    with native_stdout_to_stderr():
      servers = _from_cluster_flag(_CLUSTER.value)
  graphs = _graphs(argv[1:])
  inputs = [measure_flags.step_inputs(g) for g in graphs]
  try:
    with native_stdout_to_stderr():
      report, cluster = _calibrate(graphs, inputs, servers)
  except TfplaceError as e:
    exit_now_if_tf_busy("calibrate", e)
    raise
  report.calibration.save(_OUT.value)
  _print_report(report, cluster, os.path.abspath(_OUT.value), inputs)


def _calibrate(graphs, inputs, servers=None):
  """(CalibrationReport, Cluster) on the cluster the flags name (`servers`:
  what `_from_cluster_flag` read of --cluster)."""
  import functools
  from tfplace.measurement.calibration_runs import calibrate_on_cluster
  calibrate = functools.partial(calibrate_on_cluster, feeds=inputs)
  if _IN_PROCESS.value:
    from tfplace.cost.presets import preset
    cluster = preset("local")
    return calibrate(graphs, cluster,
                     measure_flags.measure_config("")), cluster
  if local_workers_flags.requested():
    with local_workers_flags.local_cluster() as lc:
      cluster = lc.to_cluster()
      return calibrate(graphs, cluster, measure_flags.measure_config(
          lc.target, lc.addresses)), cluster
  cluster, target, workers = servers or _from_target(_TARGET.value)
  return calibrate(graphs, cluster,
                   measure_flags.measure_config(target, workers)), cluster


def _graphs(sources: List[str]):
  """The GRAPH arguments' graphs, or the --suite's."""
  if sources:
    sizes = input_flags.import_kwargs()
    return [load_graph_or_model(s, **sizes) for s in sources]
  from tfplace.models import calibration_suite
  from tfplace.models.registry import build_model
  return [build_model(name, **sizes)
          for name, sizes in calibration_suite.suite(_SUITE.value)]


def _check_flags() -> None:
  if not _OUT.value:
    raise TfplaceError("--out is required (the calibration JSON to write)")
  chosen = [local_workers_flags.requested(), bool(_CLUSTER.value),
            bool(_TARGET.value), _IN_PROCESS.value]
  if sum(chosen) != 1:
    raise TfplaceError("give exactly one of --local_workers N, --cluster "
                       "STATE_OR_SPEC, --target grpc://host:port, "
                       "--in_process")
  local_workers_flags.check()
  measure_flags.measure_config("")  # --steps, --warmup, timeouts


def _from_cluster_flag(value: str) -> Tuple[object, str, List[str]]:
  """(Cluster, target, worker addresses) of the servers --cluster names,
  checked reachable, with the GPUs they list."""
  remote, _ = servers_from_cluster_arg(value)
  remote = remote.with_listed_gpus()  # what the servers have
  return remote.to_cluster(), remote.target, remote.addresses


def _from_target(target: str) -> Tuple[object, str, List[str]]:
  """(Cluster, target, []): the worker CPUs the server at `target` lists
  (their addresses are unknown: only the target is health-checked)."""
  from tfplace.measurement.local_cluster import cluster_from_target
  if not target.startswith("grpc://"):
    target = "grpc://" + target
  return cluster_from_target(target), target, []


def _print_report(report, cluster, out: str, inputs) -> None:
  from tfplace.measurement import machine_drift  # pylint: disable=import-outside-toplevel
  cal = report.calibration
  ok = [r for r in report.runs if r.measured_s is not None]
  med = report.median_abs_rel_error
  spread = machine_drift.benchmark_spread(report.benchmark_repeats)
  steadiness = machine_drift.describe_spread(spread,
                                             len(report.benchmark_repeats))
  if _JSON.value:
    warning = cal.unsteady_warning(out)  # The text report prints its own.
    if warning:
      logging.warning("%s", warning)
    sys.stdout.write(json.dumps({
        "out": out, "graphs": list(report.graph_names),
        "num_ops": report.num_ops, "cluster": cluster.name,
        "num_devices": cluster.num_devices, "calibration": cal.to_dict(),
        "benchmark": report.benchmark.to_dict(),
        "benchmark_spread": spread.to_dict() if spread else None,
        "num_samples": report.num_samples,
        "in_sample_median_abs_rel_error": None if math.isnan(med) else med,
        "num_runs": len(report.runs), "num_failed": len(report.runs) - len(ok),
        "second_pass": report.second_pass,
        "runs": [{"label": r.label, "predicted_s": r.predicted_s,
                  "measured_s": r.measured_s, "error": r.error}
                 for r in report.runs],
        "inputs": {name: [dataclasses.asdict(x) for x in fed.sources]
                   for name, fed in zip(report.graph_names, inputs)
                   if fed.sources}}) + "\n")
    return
  fitted = sum(len(v) for v in cal.op_types.values())
  lines = [f"measured {cluster.name} ({cluster.num_devices} devices):",
           report.benchmark.describe(), "",
           f"calibrated on {', '.join(report.graph_names)} "
           f"({report.num_ops} ops): {len(ok)} of {len(report.runs)} runs "
           f"measured, {report.num_samples} op records, {fitted} op types "
           f"fitted; {report.message_fit}"]
  for name, fed in zip(report.graph_names, inputs):
    if fed.sources:
      lines += [f"  {name} {line}" for line in measure_flags.input_lines(fed)]
  if report.second_pass:
    lines.append(report.second_pass)
  if steadiness:
    lines.append(steadiness)
  lines += [f"in-sample median |rel error| on the {len(ok)} calibration "
            f"runs (the runs the fit saw): {med * 100:.1f} %",
            f"wrote {out}; usable with any graph: tfplace simulate GRAPH "
            f"--cluster ... --placement p.json --calibration {out}"]
  sys.stdout.write("\n".join(lines) + "\n")
