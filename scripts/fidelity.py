"""Simulator fidelity: calibrated predictions vs real step times.

Starts a 2-worker local TF server cluster (one core each), fits the link
(comm benchmark), and for each benchmark graph at reduced sizes calibrates
the simulator on 10 placements (op times, compute correction, step and
per-transfer overheads, link model; see `tfplace.measurement.calibration_fit`)
and predicts every baseline placer and 16 random group placements with the
calibrated simulator alone; calibration and evaluated placements are
measured interleaved in one batch, and no calibration placement is
evaluated. Prints a Markdown table per graph and a summary (with
--calibration_out DIR, each graph's calibration is saved there too);
with --json the last stdout line is a JSON object with `median_abs_rel_error`
and `spearman` (the mean of the per-graph Spearman rho).

With --placeholder_inputs the graphs take their inputs from placeholders
(the models' `placeholder_inputs=True` variants: float inputs/images, int32
labels and token ids), fed synthetic values each step (integer ids in the
range the graph implies); each table says where its inputs came from.

Sizes (chosen so the script runs in well under 15 minutes on 2 cores):
  mlp_towers: 4 towers x 3 layers, hidden 128, batch 64, input 128
  small_cnn:  batch 16, 32x32 images
  rnnlm:      2 layers, hidden 64, 4 unrolled steps, batch 16, vocab 1000
"""

import json
import math
import os
import sys

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace import interrupts

interrupts.install("fidelity")  # Ctrl-C during the imports ends cleanly.

from absl import flags

from tfplace.cli.app_runner import run_app

_GRAPHS = flags.DEFINE_list("graphs", ["mlp_towers", "small_cnn", "rnnlm"],
                            "benchmark graphs")
_NUM_RANDOM = flags.DEFINE_integer("num_random", 16,
                                   "random group placements per graph")
_STEPS = flags.DEFINE_integer(
    "steps", 10, "timed steps per placement (with 5, the median error was "
    "~1.5x higher: see WORKSPACE_NOTES.md)")
_CACHE = flags.DEFINE_string("cache_dir", None, "measurement cache directory")
_JSON = flags.DEFINE_bool("json", False, "end with a JSON summary line")
_PLACEHOLDERS = flags.DEFINE_bool(
    "placeholder_inputs", False, "use the graphs' placeholder-fed variants "
    "(inputs fed synthetic values every step) instead of in-graph inputs")
_CALIBRATION_OUT = flags.DEFINE_string(
    "calibration_out", None, "write each graph's fitted calibration as "
    "DIR/<graph>.calibration.json (for `tfplace simulate --calibration`)")

SIZES = {
    "mlp_towers": dict(num_towers=4, num_layers=3, hidden=128, batch_size=64,
                       input_size=128),
    "small_cnn": dict(batch_size=16, image_size=32),
    "rnnlm": dict(num_layers=2, hidden=64, num_steps=4, batch_size=16,
                  vocab=1000),
}


def main(argv):
  del argv
  if _CALIBRATION_OUT.value:
    os.makedirs(_CALIBRATION_OUT.value, exist_ok=True)
  from tfplace.experiments import fidelity
  from tfplace.measurement import comm_benchmark
  from tfplace.measurement.config import MeasureConfig
  from tfplace.measurement.local_cluster import LocalCluster, worker_device
  from tfplace.models.registry import build_model
  reports = []
  with LocalCluster(num_workers=2, cores_per_worker=1) as lc:
    cluster = lc.to_cluster()
    config = MeasureConfig(target=lc.target, steps=_STEPS.value)
    samples = comm_benchmark.benchmark_transfers(
        worker_device(0), worker_device(1),
        config=MeasureConfig(target=lc.target, steps=7))
    link = comm_benchmark.fit_link(samples)
    print(f"loopback link: latency {link.latency_s * 1e6:.1f} us, bandwidth "
          f"{link.bandwidth / 1e9:.3f} GB/s (R^2 {link.r2:.3f})\n")
    for name in _GRAPHS.value:
      sizes = dict(SIZES.get(name, {}))
      if _PLACEHOLDERS.value:
        sizes["placeholder_inputs"] = True
      graph = build_model(name, **sizes)
      report = fidelity.run_fidelity(
          graph, cluster, config, num_random=_NUM_RANDOM.value,
          link_fits={"loopback": link}, cache_dir=_CACHE.value)
      print(fidelity.markdown_table(report))
      if _CALIBRATION_OUT.value:
        path = os.path.join(_CALIBRATION_OUT.value,
                            f"{name}.calibration.json")
        report.calibration.save(path)
        print(f"calibration written to {path}\n")
      sys.stdout.flush()
      reports.append(report)
  rows = [r for rep in reports for r in rep.rows]
  med, _ = fidelity.summarize(rows)
  rhos = [rep.spearman for rep in reports if not math.isnan(rep.spearman)]
  rho = sum(rhos) / len(rhos) if rhos else float("nan")
  print("## summary\n\n| graph | placements | median abs error | Spearman |\n"
        "|---|---:|---:|---:|")
  for rep in reports:
    print(f"| {rep.graph_name} | {len(rep.rows)} | "
          f"{rep.median_abs_rel_error * 100:.1f} % | {rep.spearman:.3f} |")
  print(f"| all | {len(rows)} | {med * 100:.1f} % | {rho:.3f} (mean) |")
  if _JSON.value:
    print(json.dumps({
        "median_abs_rel_error": med, "spearman": rho,
        "per_graph": {rep.graph_name: {
            "median_abs_rel_error": rep.median_abs_rel_error,
            "spearman": rep.spearman, "placements": len(rep.rows)}
                      for rep in reports},
        "link": {"latency_s": link.latency_s, "bandwidth": link.bandwidth},
        "inputs": {rep.graph_name: [i.describe() for i in rep.inputs]
                   for rep in reports}}))


if __name__ == "__main__":
  run_app(main, sys.argv, "fidelity")
