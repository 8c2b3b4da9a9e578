"""Real runs end to end: a local TF cluster, baseline placements, traces.

Starts a 2-worker local server cluster (one core each), measures its workers
and link, calibrates the simulator on runs of a benchmark graph (each worker
alone, halves, one random split), then places it with every baseline placer,
measures each placement and prints the simulator's error table;
then writes a profiler trace (profile dir + step_stats.pb) of the fastest
two-worker placement, a Perfetto JSON and a Gantt PNG (via tfplace.trace), and stops the
cluster.
"""

import os
import sys

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.cli.app_runner import run_app, start_script

start_script("demo_real_runs")  # Ctrl-C, TF's start-up lines: from here.

from absl import flags


_MODEL = flags.DEFINE_string("model", "mlp_towers", "benchmark graph")
_OUT = flags.DEFINE_string("out_dir", "/tmp/tfplace_demo", "output directory")
_PLACEHOLDERS = flags.DEFINE_bool(
    "placeholder_inputs", False, "use the model's placeholder-fed variant "
    "(synthetic values fed every step)")
_STEPS = flags.DEFINE_integer("steps", 5, "timed steps per placement (5: a "
                              "quick demo; scripts/fidelity.py times 10)")

SIZES = {"mlp_towers": dict(num_towers=4, num_layers=3, hidden=128,
                            batch_size=64, input_size=128),
         "small_cnn": dict(batch_size=16, image_size=32)}


def main(argv):
  del argv
  from tfplace.cli.run_helpers import native_stdout_to_stderr
  from tfplace.experiments import fidelity, fidelity_report
  from tfplace.measurement import runner
  from tfplace.measurement.config import MeasureConfig
  from tfplace.measurement.local_cluster import LocalCluster
  from tfplace.models.registry import build_model
  sizes = dict(SIZES.get(_MODEL.value, {}))
  if _PLACEHOLDERS.value:
    sizes["placeholder_inputs"] = True
  graph = build_model(_MODEL.value, **sizes)
  with LocalCluster(num_workers=2) as lc:
    cluster = lc.to_cluster()
    # The cluster measured, the graph calibrated on runs of its own (each
    # device alone, halves, one random split), then every baseline placer
    # is predicted and measured.
    config = MeasureConfig(target=lc.target, steps=_STEPS.value)
    report = fidelity.run_fidelity(graph, cluster, config, num_random=0)
    print(fidelity_report.markdown_table(report))
    # Trace the fastest placement that uses both workers (a one-device
    # timeline shows no transfers).
    placements = dict(fidelity.baseline_placements(graph, cluster))
    split = [r for r in report.rows if r.measured_s
             and len(set(placements[r.label].devices.values())) > 1]
    best_label = min(split or [r for r in report.rows if r.measured_s],
                     key=lambda r: r.measured_s).label
    best = placements[best_label]
    trace_dir = os.path.join(_OUT.value, "trace")
    # The profiler client prints "Starting to trace ..." on the C++ stdout;
    # on stderr, run_app's filter drops it.
    with native_stdout_to_stderr():
      runner.measure(graph, best, config.replace(steps=2),
                     trace_dir=trace_dir)
  _export(os.path.join(trace_dir, "step_stats.pb"), best_label)


def _export(step_stats: str, label: str) -> None:
  from tfplace.trace import export, plot, reader
  trace = reader.load_trace(step_stats)
  perfetto = os.path.join(_OUT.value, "trace.perfetto.json")
  export.write_perfetto(trace, perfetto)
  print(f"trace of {label}: {os.path.dirname(step_stats)} (profile + "
        f"step_stats.pb), Perfetto {perfetto}")
  try:
    png = os.path.join(_OUT.value, "gantt.png")
    plot.gantt(trace, png, title=f"{label}: one step")
    print(f"Gantt chart {png}")
  except Exception as e:  # pylint: disable=broad-except
    print(f"no Gantt chart: {e}")


if __name__ == "__main__":
  run_app(main, sys.argv, "demo_real_runs")
