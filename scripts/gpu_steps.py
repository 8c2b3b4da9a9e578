"""Real step times on this machine's CPU and GPUs, against the simulator.

Builds each --graphs model, places it on the cluster preset `local` (the
CPU and every GPU TensorFlow sees here) with each --placers placer
(`single_cpu`, `single_gpu` and the baselines), measures every placement
in this process and prints the measured median step time beside the
uncalibrated prediction (the preset's datasheet figures, analytical op
costs); a placer whose placement an earlier one gave is measured again
and says so (the spread of one placement's medians is the run-to-run
noise). With --trace_dir, the placement of --trace_placer on the first graph
is traced with the TF profiler and its per-device summary printed (on a GPU
the trace holds the GPU's kernels and copies).

Needs a GPU (two devices at least); CPU-only machines stop with a message.
With --json the last stdout line is one JSON object with the results.
"""

import json
import sys

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.cli.app_runner import run_app, start_script

start_script("gpu_steps")  # Ctrl-C, TF's start-up lines: from here.

from absl import flags


_GRAPHS = flags.DEFINE_list(
    "graphs", ["small_cnn", "resnet_like", "transformer", "rnnlm",
               "mlp_towers", "random_dag"], "models (default sizes)")
_PLACERS = flags.DEFINE_list(
    "placers", ["single_cpu", "single_gpu", "m_etf", "m_sct", "m_topo",
                "critical_path", "round_robin", "hash"],
    "placers to measure on CPU + GPU")
_STEPS = flags.DEFINE_integer("steps", 10, "timed steps per placement")
_TRACE_DIR = flags.DEFINE_string("trace_dir", None, "trace the first graph "
                                 "placed by --trace_placer here")
_TRACE_PLACER = flags.DEFINE_string("trace_placer", "single_gpu",
                                    "the placer whose placement is traced")
_JSON = flags.DEFINE_bool("json", False, "end with a JSON summary line")


def _row(graph, cluster, placer, config, seen):
  """(predicted s, measured s or None, same placement as, error or None);
  `seen`: placement -> the first placer that gave it (updated)."""
  from tfplace.errors import TfplaceError
  from tfplace.pipeline import place
  try:
    placement = place(graph, cluster, placer, seed=0)
  except TfplaceError as e:
    return None, None, None, f"placing: {e}"
  key = tuple(sorted(placement.devices.items()))
  same = seen.setdefault(key, placer)
  predicted = placement.metadata.predicted_step_time_s
  try:
    timing = tfplace.measure(graph, placement, config, cluster=cluster)
  except TfplaceError as e:
    return predicted, None, same, f"measuring: {e}"
  return predicted, timing.median_step_time_s, same, None


def _trace(graph, cluster, config):
  from tfplace.pipeline import place
  from tfplace.trace.summary import format_summary
  placement = place(graph, cluster, _TRACE_PLACER.value, seed=0)
  tfplace.measure(graph, placement, config, cluster=cluster,
                  trace_dir=_TRACE_DIR.value)
  summary = tfplace.summarize(tfplace.load_trace(_TRACE_DIR.value))
  print(f"## trace of {graph.name} placed by {_TRACE_PLACER.value} "
        f"({_TRACE_DIR.value})\n")
  print(format_summary(summary))


def main(argv):
  del argv
  from tfplace.cost.presets import preset
  from tfplace.errors import TfplaceError
  from tfplace.measurement.config import MeasureConfig
  from tfplace.models.registry import build_model
  from tfplace.placers.registry import list_placers
  unknown = sorted(set(_PLACERS.value) - set(list_placers()))
  if unknown:
    raise TfplaceError(f"--placers: unknown {unknown}; choose from "
                       f"{', '.join(list_placers())}")
  cluster = preset("local")
  if not any(d.type == "GPU" for d in cluster.devices):
    raise TfplaceError("TF sees no GPU here (devices: "
                       f"{', '.join(cluster.device_names)}); run this on a "
                       "GPU machine")
  print(f"devices: {', '.join(cluster.device_names)}\n", flush=True)
  config = MeasureConfig(steps=_STEPS.value)
  results = {}
  for name in _GRAPHS.value:
    graph = build_model(name)
    print(f"## {name}: {graph.num_ops} ops\n\n| placer | same placement as "
          "| predicted | measured | measured / predicted |\n"
          "|---|---|---:|---:|---:|")
    rows = results[name] = {}
    seen = {}
    for placer in _PLACERS.value:
      predicted, measured, same, error = _row(graph, cluster, placer, config,
                                              seen)
      same = "" if same in (None, placer) else same
      rows[placer] = dict(predicted_s=predicted, measured_s=measured,
                          same_placement_as=same or None, error=error)
      if error:
        print(f"| {placer} | {same} | | | {error} |", flush=True)
        continue
      ratio = measured / predicted if predicted else float("nan")
      print(f"| {placer} | {same} | {predicted * 1e3:.2f} ms | "
            f"{measured * 1e3:.2f} ms | {ratio:.2f} |", flush=True)
    print()
  if _TRACE_DIR.value:
    _trace(build_model(_GRAPHS.value[0]), cluster, config)
  if _JSON.value:
    print(json.dumps({"devices": list(cluster.device_names),
                      "graphs": results}))


if __name__ == "__main__":
  run_app(main, sys.argv, "gpu_steps")
