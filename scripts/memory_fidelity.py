"""Simulated against measured peak memory per device.

Starts a local TF server cluster (--workers 2, --cores_per_worker 1; each
worker's CPU memory comes from TF's BFC allocator, which keeps the
statistics) and benchmarks it (a few seconds: the measured cluster, which
also knows whether the workers' convolution gradients take patch buffers
from the allocator), places every graph of --graphs with every placer of --placers
on it (analytical costs), simulates each placement and measures it (one
traced step: `StepTiming.peak_memory_bytes`, the most bytes each worker's
allocator held). Prints a row per device: simulated and measured peak and
measured / simulated; then the median ratio, its range, and how many
devices took over 1.1x what the simulator said (the direction in which a
placement the simulator calls feasible could run out of memory).
--in_process measures in this process instead, on the cluster preset
`local` (the CPU and every GPU TensorFlow sees here; each GPU's allocator
keeps statistics, and the script starts TF with the CPU's BFC allocator):
on a GPU machine, the GPUs' memory. --cache_dir keeps each measurement, so
an interrupted run resumes. --json: the last line is a JSON object with the
rows and the summary.
"""

import contextlib
import dataclasses
import json
import os
import sys

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.cli.app_runner import run_app, start_script

start_script("memory_fidelity")  # Ctrl-C, TF's start-up lines: from here.

from absl import flags

from tfplace.models.registry import list_models
from tfplace.placers.registry import list_placers

_GRAPHS = flags.DEFINE_list(
    "graphs", ["small_cnn", "mlp_towers", "transformer", "resnet_like",
               "random_dag", "mobilenet_v2"],
    f"benchmark models, default sizes (of {list_models()})")
_PLACERS = flags.DEFINE_list(
    "placers", ["single_cpu", "m_etf", "m_topo", "hash"], "placers")
_WORKERS = flags.DEFINE_integer("workers", 2, "TF server workers",
                                lower_bound=1)
_CORES = flags.DEFINE_integer("cores_per_worker", 1, "cores per worker",
                              lower_bound=1)
_IN_PROCESS = flags.DEFINE_bool(
    "in_process", False, "measure in this process on the preset `local` "
    "(this machine's CPU and GPUs) instead of on TF server workers")
_CACHE = flags.DEFINE_string("cache_dir", None, "measurement cache directory")
_JSON = flags.DEFINE_bool("json", False, "end with a JSON line")

flags.register_validator(
    "graphs", lambda v: bool(v) and set(v) <= set(list_models()),
    message=f"--graphs: one or more of {list_models()}")
flags.register_validator(
    "placers", lambda v: bool(v) and set(v) <= set(list_placers()),
    message=f"--placers: one or more of {list_placers()}")


def main(argv):
  del argv
  from tfplace.measurement.local_cluster import CPU_BFC_ENV
  os.environ.setdefault(CPU_BFC_ENV, "true")  # Before TF needs CPU memory.
  from tfplace.experiments.memory_fidelity import memory_rows, summarize
  from tfplace.measurement.batch import measure_batch
  from tfplace.measurement.config import MeasureConfig
  from tfplace.models.registry import build_model
  from tfplace.pipeline import place, simulate
  from tfplace.units import format_bytes
  rows = []
  with _devices() as (cluster, target):
    config = MeasureConfig(target=target, warmup=1, steps=1)
    print("| graph | placement | device | simulated | measured | measured / "
          "simulated |\n|---|---|---|---:|---:|---:|", flush=True)
    for name in _GRAPHS.value:
      graph = build_model(name)
      labelled = [(p, place(graph, cluster, p)) for p in _PLACERS.value]
      results = [simulate(graph, cluster, p) for _, p in labelled]
      outcomes = measure_batch(graph, [p for _, p in labelled], config,
                               cluster=cluster, cache_dir=_CACHE.value)
      for (label, _), outcome in zip(labelled, outcomes):
        if not outcome.ok:
          print(f"| {name} | {label} | - | - | failed: {outcome.error} | - |")
      graph_rows = memory_rows(graph, cluster, labelled, results, outcomes)
      for r in graph_rows:
        print(f"| {r.graph} | {r.placement} | {r.device} | "
              f"{format_bytes(r.simulated_bytes)} | "
              f"{format_bytes(r.measured_bytes)} | {r.ratio:.2f} |",
              flush=True)
      rows += graph_rows
  summary = summarize(rows)
  print(f"\n{summary.num_devices} devices: measured / simulated median "
        f"{summary.median_ratio:.2f}, range {summary.min_ratio:.2f}-"
        f"{summary.max_ratio:.2f}; {summary.under_predicted} took over 1.1x "
        "the simulated peak")
  if _JSON.value:
    print(json.dumps({"rows": [dataclasses.asdict(r) for r in rows],
                      "summary": dataclasses.asdict(summary)}))


@contextlib.contextmanager
def _devices():
  """(cluster, session target) to place on and measure."""
  if _IN_PROCESS.value:
    from tfplace.cost.presets import load_cluster
    yield load_cluster("local"), ""
    return
  from tfplace.measurement.local_cluster import LocalCluster
  with LocalCluster(_WORKERS.value, _CORES.value, benchmark=True) as lc:
    yield lc.to_cluster(), lc.target


if __name__ == "__main__":
  run_app(main, sys.argv, "memory_fidelity")
