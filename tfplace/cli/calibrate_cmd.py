"""fit the simulator to a real cluster and save the calibration file.

usage: tfplace calibrate GRAPH
         (--local_workers N | --cluster STATE_OR_SPEC | --target grpc://...)
         --out calibration.json [--num_random 8] [--steps 10] [--warmup 2]
         [--nolink_benchmark] [--json]

GRAPH is a graph file (any form `import_graph` reads) or a benchmark model
name. On the cluster's TF servers it benchmarks the link between the first
two workers (the cluster's default link is kept when it cannot), measures
the calibration placements (all ops on one device, the topological halves,
--num_random random colocation-group placements), fits a calibration
(compute scale per device type, per-op-type factors where there are enough
samples, launch, per-transfer and step overheads, the link) and writes it
(format tfplace.calibration/1) for `tfplace simulate/place --calibration`.

The calibration is usable with any graph: op-type factors apply to any
graph's ops of those types, and ops of other types fall back to the
device-type scale. The error printed is in-sample (on the calibration runs
the fit saw); scripts/fidelity.py measures the error on held-out placements.

--local_workers N starts N pinned local TF server processes and stops them
after; --cluster takes the state file of `tfplace cluster up` or a cluster
spec ({"worker": ["host:port", ...]}, inline or a file); --target names one
server, whose cluster's workers are listed from it.
"""

import dataclasses
import json
import math
import os
import sys
from typing import List, Tuple

from absl import flags

from tfplace.cli import measure_flags
from tfplace.cli.run_helpers import (exit_now_if_tf_busy, load_graph_or_model,
                                     native_stdout_to_stderr,
                                     servers_from_cluster_arg)
from tfplace.errors import TfplaceError
from tfplace.io_utils import check_out_path

_LOCAL_WORKERS = flags.DEFINE_integer(
    "local_workers", 0, "start this many local TF server processes")
_CLUSTER = flags.DEFINE_string(
    "cluster", None, "`tfplace cluster up` state file, or a cluster spec JSON "
    "(inline or file) of running TF servers")
_TARGET = flags.DEFINE_string("target", "", "session target, grpc://host:port")
_OUT = flags.DEFINE_string("out", None, "calibration JSON file to write")
_NUM_RANDOM = flags.DEFINE_integer(
    "num_random", 8, "random group placements among the calibration runs")
_SEED = flags.DEFINE_integer("seed", 0, "seed of the random placements")
_LINK = flags.DEFINE_bool("link_benchmark", True,
                          "benchmark the link between two workers")
_JSON = flags.DEFINE_bool("json", False, "print the result as one JSON object")
flags.adopt_module_key_flags(measure_flags)


def main(argv: List[str]) -> None:
  """Runs `tfplace calibrate`; see the module docstring."""
  if len(argv) != 2:
    raise TfplaceError("expected exactly one GRAPH argument: tfplace "
                       "calibrate GRAPH --local_workers 2 --out cal.json")
  _check_flags()
  check_out_path(_OUT.value)
  graph = load_graph_or_model(argv[1])
  inputs = measure_flags.step_inputs(graph)
  settings = dict(num_random=_NUM_RANDOM.value, link=_LINK.value,
                  seed=_SEED.value, feeds=inputs)
  try:
    with native_stdout_to_stderr():
      report, cluster = _calibrate(graph, settings)
  except TfplaceError as e:
    exit_now_if_tf_busy("calibrate", e)
    raise
  report.calibration.save(_OUT.value)
  _print_report(report, cluster, os.path.abspath(_OUT.value), inputs)


def _calibrate(graph, settings):
  """(CalibrationReport, Cluster) on the cluster the flags name."""
  from tfplace.measurement.calibration_runs import calibrate_on_cluster
  if _LOCAL_WORKERS.value:
    from tfplace.measurement.local_cluster import LocalCluster
    with LocalCluster(num_workers=_LOCAL_WORKERS.value) as lc:
      cluster = lc.to_cluster()
      return calibrate_on_cluster(
          graph, cluster,
          measure_flags.measure_config(lc.target, lc.addresses),
          **settings), cluster
  cluster, target, workers = (
      _from_cluster_flag(_CLUSTER.value) if _CLUSTER.value
      else _from_target(_TARGET.value))
  return calibrate_on_cluster(
      graph, cluster, measure_flags.measure_config(target, workers),
      **settings), cluster


def _check_flags() -> None:
  if not _OUT.value:
    raise TfplaceError("--out is required (the calibration JSON to write)")
  chosen = [_LOCAL_WORKERS.value != 0, bool(_CLUSTER.value),
            bool(_TARGET.value)]
  if sum(chosen) != 1:
    raise TfplaceError("give exactly one of --local_workers N, --cluster "
                       "STATE_OR_SPEC, --target grpc://host:port")
  if _LOCAL_WORKERS.value < 0:
    raise TfplaceError("--local_workers must be >= 1")
  if _NUM_RANDOM.value < 0:
    raise TfplaceError("--num_random must be >= 0")
  measure_flags.measure_config("")  # --steps, --warmup, timeouts


def _from_cluster_flag(value: str) -> Tuple[object, str, List[str]]:
  """(Cluster, target, worker addresses) of the servers --cluster names,
  checked reachable."""
  from tfplace.measurement.local_cluster import check_reachable
  remote, _ = servers_from_cluster_arg(value)
  check_reachable(remote.addresses)
  return remote.to_cluster(), remote.target, remote.addresses


def _from_target(target: str) -> Tuple[object, str, List[str]]:
  """(Cluster, target, []): the worker CPUs the server at `target` lists
  (their addresses are unknown: only the target is health-checked)."""
  from tfplace.measurement.local_cluster import cluster_from_target
  if not target.startswith("grpc://"):
    target = "grpc://" + target
  return cluster_from_target(target), target, []


def _print_report(report, cluster, out: str, inputs) -> None:
  cal = report.calibration
  ok = [r for r in report.runs if r.measured_s is not None]
  if _JSON.value:
    med = report.median_abs_rel_error
    sys.stdout.write(json.dumps({
        "out": out, "graph": report.graph_name, "num_ops": report.num_ops,
        "cluster": cluster.name, "num_devices": cluster.num_devices,
        "calibration": cal.to_dict(),
        "in_sample_median_abs_rel_error": None if math.isnan(med) else med,
        "num_runs": len(report.runs), "num_failed": len(report.runs) - len(ok),
        "runs": [{"label": r.label, "predicted_s": r.predicted_s,
                  "measured_s": r.measured_s, "error": r.error}
                 for r in report.runs],
        "link_benchmarked": bool(report.link_fits),
        "inputs": [dataclasses.asdict(s) for s in inputs.sources]}) + "\n")
    return
  lines = [f"calibrated on {report.graph_name} ({report.num_ops} ops): "
           f"{len(ok)} of {len(report.runs)} placements measured on "
           f"{cluster.name} ({cluster.num_devices} devices)"]
  lines += [f"  {line}" for line in measure_flags.input_lines(inputs)]
  lines += _figures(report, cluster)
  lines += [f"in-sample median |rel error| on the {len(ok)} calibration runs "
            f"(the runs the fit saw): {report.median_abs_rel_error * 100:.1f}"
            " %",
            f"wrote {out}; usable with any graph: tfplace simulate GRAPH "
            f"--cluster ... --placement p.json --calibration {out}"]
  sys.stdout.write("\n".join(lines) + "\n")


def _figures(report, cluster) -> List[str]:
  cal = report.calibration

  def per_type(values, unit=1.0, fmt="{:.3g}"):
    return ", ".join(f"{k} {fmt.format(v * unit)}"
                     for k, v in sorted(values.items())) or "-"

  op_types = per_type(cal.op_type_scale, fmt="{:.2f}")
  kind = cluster.default_link.kind
  if kind in cal.links:
    link = cal.links[kind]
    fit = report.link_fits.get(kind)
    how = (f"benchmarked latency {fit.latency_s * 1e6:.1f} us, R^2 "
           f"{fit.r2:.3f}; latency refitted on the runs" if fit else "fitted")
    link_text = (f"latency {link.latency_s * 1e6:.1f} us, bandwidth "
                 f"{link.bandwidth / 1e9:.3f} GB/s ({how})")
  else:
    link_text = "not benchmarked: the cluster's default link is kept"
  return [
      f"  compute scale: {per_type(cal.compute_scale)}",
      f"  op-type factors: {op_types} (other op types: the device-type "
      "scale)",
      f"  launch overhead: {per_type(cal.launch_overhead_s, 1e6, '{:.2f}')} us",
      f"  per-transfer overhead: "
      f"{per_type(cal.transfer_overhead_s, 1e6, '{:.1f}')} us",
      f"  step overhead: {cal.step_overhead_s * 1e3:.3f} ms",
      f"  link {kind}: {link_text}; latency "
      f"{'overlapped' if cal.overlap_latency else 'holds the link'}"]
