"""Simulator fidelity: calibrated predictions vs real step times.

Starts a local TF server cluster (--workers 2, --cores_per_worker 1; on a
GPU machine --worker_gpus gives workers GPUs, e.g. `0,none`: GPU 0 to
worker 0) and measures its devices and links
(`tfplace.measurement.cluster_benchmark`). With
--in_process it measures in this process instead, on the devices TF sees
here (the cluster preset `local`: /cpu:0 with every core, and each GPU):
on a GPU machine, CPU + GPU.

--cross (issue 13): calibrates once on the calibration suite (--suite, the
graphs of `tfplace.models.calibration_suite`), then for every graph of
--graphs (none of them used for calibration) places it with every baseline
placer on the calibrated costs, predicts each placement and measures it.
Prints a table per graph and the matrix: per graph median |error|, Spearman,
whether the placement predicted best is within 5 % of the measured best,
the uncalibrated prediction's error (measured cluster, analytical costs) and
the share of predicted op time on op types the calibration never saw, each
against its target. Measure it alone on the machine: other load moves the
step times by more than the targets. The calibration's figures are the
medians of three cluster benchmarks spread over the suite's runs; after
each judged graph the cluster is benchmarked again (--probe_drift) and the
matrix prints how far the machine moved since calibration (time ratios of
the compute rates, the per-op overhead, the per-message cost and the empty
step), and the median error with the calibration's figures scaled by those
ratios (`machine_drift.drift_adjusted`: the model's error less the
machine's measured change; a diagnostic, not a target). --rounds R
measures every batch R times in rotated orders and keeps each placement's
median round (slower: R times the runs); the matrix then prints each
graph's rounds' spread (slowest / fastest round - 1, the median over its
placements): how far the measurement itself repeats, next to the model's
error. Each graph's level (median predicted / measured) and its error
beside the level (the predictions divided by it) are printed too: how
well the placements are predicted relative to each other, apart from the
graph's level, which on a shared machine also carries the machine's speed
while the graph ran (a diagnostic, not a target).

--record FILE keeps everything a --cross run measured (suite runs, judged
placements and step times, benchmarks; ~1 MB gzip-compressed when FILE
ends in .gz);
--replay FILE[,FILE...] fits the calibration again with this code and
judges it on those measurements, with no cluster: a change to the
calibration model is judged on fixed data (`tfplace.experiments.
cross_record`) before a live run. testdata/cross_records/ holds such
records of this machine (see WORKSPACE_NOTES.md, issue 13). With
--op_types N it also prints, per judged graph, the N op types whose traced
time in the one-device runs the calibration misses most
(`tfplace.experiments.op_type_errors`).

Without --cross: the per-graph check, each graph calibrated on its own
one-device and split runs and judged on its other placements (the baselines
and --num_random random group placements).

With --placeholder_inputs the graphs that have such a variant (mlp_towers,
small_cnn, rnnlm) take their inputs from placeholders, fed synthetic values
each step (integer ids in the range the graph implies); each table says
where its inputs came from.

With --json the last stdout line is one JSON object with the results.

Graph sizes (--cross: 5 ms to 1 s per step on one core):
  resnet_like: batch 8, 32x32, widths 16/32/64, 2 blocks per stage
  resnet_large: the same at batch 32 and widths 32/64/128
  resnet_xl: the same at batch 64 and widths 48/96/192
  transformer: batch 8, 32 tokens, d_model 64, 4 heads, 2 layers
  random_dag: 6 layers x 4 nodes, hidden 128, batch 32
  mlp_towers: 4 towers x 3 layers, hidden 128, batch 64, input 128
  small_cnn: batch 16, 32x32 images
  rnnlm: 2 layers, hidden 64, 4 unrolled steps, batch 16, vocab 1000
  mobilenet_v2: Keras's MobileNetV2, alpha 0.35, batch 8, 64x64
  keras_lstm: Keras Embedding -> LSTM (one While loop of 20 trips) -> Dense,
    batch 16, hidden 64
  keras_transformer: Keras Embedding -> 2 encoder layers (MultiHeadAttention,
    4 heads, width 64, GELU feed-forward 128) -> Dense, batch 16, 32 tokens
  keras_transformer_50k (not judged by default): the same with a 50,000-word
    vocabulary, whose 12.8 MB table Adam copies whole several times a step
    (copy-on-read: `tfplace.graph.variable_copies`); ~24 ms per step
"""

import json
import math
import os
import sys

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.cli.app_runner import run_app, start_script

start_script("fidelity")  # Ctrl-C, TF's start-up lines: from here.

from absl import flags


GRAPHS = {
    "resnet_like": ("resnet_like", dict(batch_size=8)),
    "resnet_large": ("resnet_like", dict(batch_size=32,
                                         widths=(32, 64, 128))),
    "resnet_xl": ("resnet_like", dict(batch_size=64, widths=(48, 96, 192))),
    "transformer": ("transformer", {}),
    "random_dag": ("random_dag", {}),
    "mlp_towers": ("mlp_towers", dict(num_towers=4, num_layers=3, hidden=128,
                                      batch_size=64, input_size=128)),
    "small_cnn": ("small_cnn", dict(batch_size=16, image_size=32)),
    "rnnlm": ("rnnlm", dict(num_layers=2, hidden=64, num_steps=4,
                            batch_size=16, vocab=1000)),
    "mobilenet_v2": ("mobilenet_v2", dict(batch_size=8, image_size=64)),
    "keras_lstm": ("keras_lstm", {}),
    "keras_transformer": ("keras_transformer", {}),
    "keras_transformer_50k": ("keras_transformer", dict(vocab=50000)),
}
CROSS_DEFAULT = ["resnet_like", "resnet_large", "resnet_xl", "transformer",
                 "random_dag", "mlp_towers", "small_cnn", "rnnlm",
                 "mobilenet_v2", "keras_lstm", "keras_transformer"]
PER_GRAPH_DEFAULT = ["mlp_towers", "small_cnn", "rnnlm"]

_CROSS = flags.DEFINE_bool("cross", False, "calibrate once on the suite, "
                           "judge on the other graphs (see the docstring)")
_GRAPHS = flags.DEFINE_list(
    "graphs", None, f"graphs to judge, of {sorted(GRAPHS)} (default: "
    f"--cross {','.join(CROSS_DEFAULT)}; else "
    f"{','.join(PER_GRAPH_DEFAULT)})")
_SUITE = flags.DEFINE_string("suite", "default", "calibration suite "
                             "(tfplace.models.calibration_suite.SUITES)")
_NUM_RANDOM = flags.DEFINE_integer(
    "num_random", None, "random group placements judged per graph besides "
    "the baselines (default: 0 with --cross, else 16)")
_STEPS = flags.DEFINE_integer(
    "steps", 10, "timed steps per placement (with 5, the median error was "
    "~1.5x higher: see WORKSPACE_NOTES.md)")
_ROUNDS = flags.DEFINE_integer(
    "rounds", 1, "times each batch of placements is measured, in rotated "
    "orders; each placement's median round is kept and the rounds' spread "
    "printed", lower_bound=1)
_PROBE_DRIFT = flags.DEFINE_bool(
    "probe_drift", True, "--cross: benchmark the cluster again after each "
    "graph's runs and print how the machine changed since calibration, "
    "and the error with the calibration scaled to that change (~6 s per "
    "graph on 2 workers)")
_IN_PROCESS = flags.DEFINE_bool(
    "in_process", False, "measure in this process on the CPU and the GPUs "
    "TF sees (cluster preset `local`; needs a GPU: two devices at least) "
    "instead of on a 2-worker TF server cluster")
_WORKERS = flags.DEFINE_integer("workers", 2, "TF server workers")
_CORES = flags.DEFINE_integer("cores_per_worker", 1, "cores per worker")
_WORKER_GPUS = flags.DEFINE_list(
    "worker_gpus", [], 'per worker, the GPU ids it is given, joined by "+", '
    'or "none" (e.g. 0,none)')
_CACHE = flags.DEFINE_string("cache_dir", None, "measurement cache directory")
_JSON = flags.DEFINE_bool("json", False, "end with a JSON summary line")
_PLACEHOLDERS = flags.DEFINE_bool(
    "placeholder_inputs", False, "use the graphs' placeholder-fed variants "
    "(inputs fed synthetic values every step) where they have one")
_RECORD = flags.DEFINE_string(
    "record", None, "--cross: write what the run measured to this file "
    "(.gz: compressed), for --replay")
_REPLAY = flags.DEFINE_list(
    "replay", None, "judge this code's calibration on --record files' "
    "measurements (no cluster, no runs; --graphs and the measuring flags "
    "are not used): one file prints its matrix, several the targets met "
    "per file and over all (e.g. testdata/cross_records/*.json.gz)")
_OP_TYPES = flags.DEFINE_integer(
    "op_types", 0, "with --replay: per judged graph, its N op types whose "
    "traced time in the one-device runs the calibration misses most")
_CALIBRATION_OUT = flags.DEFINE_string(
    "calibration_out", None, "write the fitted calibration(s) to this "
    "directory (--cross: DIR/cross.calibration.json; else "
    "DIR/<graph>.calibration.json)")


def _build(names):
  """(graphs, their (model, config overrides))."""
  import dataclasses
  from tfplace.errors import TfplaceError
  from tfplace.models.registry import build_model, make_config
  unknown = sorted(set(names) - set(GRAPHS))
  if unknown:
    raise TfplaceError(f"--graphs: unknown {unknown}; choose from "
                       f"{sorted(GRAPHS)}")
  graphs, specs = [], []
  for name in names:
    model, sizes = GRAPHS[name]
    fields = {f.name for f in dataclasses.fields(make_config(model))}
    if _PLACEHOLDERS.value and "placeholder_inputs" in fields:
      sizes = dict(sizes, placeholder_inputs=True)
    graph = build_model(model, **sizes)
    graph.name = name
    graphs.append(graph)
    specs.append((model, sizes))
  return graphs, specs


def _cross(cluster, config, graphs, specs):
  from tfplace.experiments import cross_record, fidelity
  from tfplace.models import calibration_suite
  from tfplace.models.registry import build_model
  suite_specs = calibration_suite.suite(_SUITE.value)
  suite = [build_model(m, **kw) for m, kw in suite_specs]
  cross = fidelity.run_cross(graphs, cluster, config, suite,
                             num_random=_NUM_RANDOM.value or 0,
                             cache_dir=_CACHE.value,
                             probe_drift=_PROBE_DRIFT.value,
                             rounds=_ROUNDS.value)
  if _RECORD.value:
    cross_record.save_record(
        _RECORD.value, cross_record.record_from_cross(cross, cluster, graphs),
        suite_specs, specs)
    print(f"measurements written to {_RECORD.value} (--replay)")
  _print_cross(cross)


def _replay(paths):
  from tfplace.experiments import cross_record, fidelity_report
  named, op_types = [], {}
  for path in paths:
    record = cross_record.load_record(path)
    print(f"replaying {path}: {len(record.suite)} suite graphs, "
          f"{len(record.judged)} judged graphs, fitted and predicted with "
          f"this code", flush=True)
    named.append((os.path.basename(path), cross_record.replay(record)))
    if _OP_TYPES.value > 0:
      _add_op_types(op_types, record, named[-1][1])
  print()
  if _OP_TYPES.value > 0:  # Before the tables that may end in --json's line.
    from tfplace.experiments import op_type_errors
    print("## op types of the one-device runs: traced against calibrated "
          "(ms per step, medians over the runs)\n")
    print(op_type_errors.summary_table(op_types, _OP_TYPES.value))
  if len(named) == 1:
    _print_cross(named[0][1])
    return
  print("## targets met on each record\n")
  print(fidelity_report.records_summary(named))
  print("## predicted / measured per placement, over the records\n")
  print(fidelity_report.placements_summary(named))
  if _JSON.value:
    print(json.dumps({name: fidelity_report.cross_json(cross)
                      for name, cross in named}))


def _add_op_types(op_types, record, cross):
  """Adds each judged graph's one-device runs of `record`, per op type
  against `cross`'s calibration, to `op_types` (graph -> runs)."""
  from tfplace.experiments import op_type_errors
  traced_op_s = {d.device: d.traced_op_s for d in record.benchmark.devices}
  calibration = cross.calibration_report.calibration
  for judged in record.judged:
    runs = judged.runs
    op_types.setdefault(runs.label, []).extend(
        op_type_errors.one_device_errors(
            runs.graph, record.cluster, calibration, runs.placements,
            runs.outcomes, traced_op_s))


def _print_cross(cross):
  from tfplace.experiments import fidelity_report
  print(cross.calibration_report.benchmark.describe() + "\n")
  for report in cross.reports:
    print(fidelity_report.markdown_table(report))
  print("## cross matrix (one calibration, graphs it never saw)\n")
  print(fidelity_report.cross_matrix(cross))
  if _CALIBRATION_OUT.value:
    path = os.path.join(_CALIBRATION_OUT.value, "cross.calibration.json")
    cross.calibration_report.calibration.save(path)
    print(f"calibration written to {path}")
  if _JSON.value:
    print(json.dumps(dict(fidelity_report.cross_json(cross),
                          inputs=_inputs(cross.reports))))


def _per_graph(cluster, config, graphs, specs):
  del specs  # Only --cross records them.
  from tfplace.experiments import fidelity, fidelity_report
  from tfplace.measurement.cluster_benchmark import benchmark_cluster
  bench = benchmark_cluster(cluster, config)
  print(bench.describe() + "\n")
  reports = []
  for graph in graphs:
    report = fidelity.run_fidelity(
        graph, cluster, config, bench=bench,
        num_random=16 if _NUM_RANDOM.value is None else _NUM_RANDOM.value,
        cache_dir=_CACHE.value, rounds=_ROUNDS.value)
    print(fidelity_report.markdown_table(report))
    if _CALIBRATION_OUT.value:
      path = os.path.join(_CALIBRATION_OUT.value,
                          f"{graph.name}.calibration.json")
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
        "inputs": _inputs(reports)}))


def _inputs(reports):
  return {rep.graph_name: [i.describe() for i in rep.inputs]
          for rep in reports}


def main(argv):
  del argv
  from tfplace.errors import TfplaceError
  from tfplace.io_utils import check_out_path
  if _CALIBRATION_OUT.value:
    os.makedirs(_CALIBRATION_OUT.value, exist_ok=True)
  if _REPLAY.value and _RECORD.value:
    raise TfplaceError("--replay measures nothing: drop --record")
  if _REPLAY.value:
    _replay(_REPLAY.value)
    return
  if _RECORD.value:
    if not _CROSS.value:
      raise TfplaceError("--record keeps a --cross run's measurements; "
                         "add --cross")
    check_out_path(_RECORD.value, "--record")
  from tfplace.measurement.config import MeasureConfig
  from tfplace.measurement.local_cluster import (LocalCluster,
                                                 parse_worker_gpus)
  gpus = parse_worker_gpus(_WORKER_GPUS.value, _WORKERS.value)
  names = _GRAPHS.value or (CROSS_DEFAULT if _CROSS.value
                            else PER_GRAPH_DEFAULT)
  graphs, specs = _build(names)
  run = _cross if _CROSS.value else _per_graph
  if _IN_PROCESS.value:
    if _WORKER_GPUS.value:
      raise TfplaceError("--worker_gpus gives GPUs to TF server workers; "
                         "--in_process uses this process's GPUs: drop one")
    from tfplace.cost.presets import preset
    cluster = preset("local")
    if cluster.num_devices < 2:
      raise TfplaceError(
          f"--in_process: TF sees only {', '.join(cluster.device_names)} "
          "here; placements need two devices (a GPU), or drop --in_process "
          "for a 2-worker TF server cluster")
    print(f"in process on {', '.join(cluster.device_names)}", flush=True)
    run(cluster, MeasureConfig(steps=_STEPS.value), graphs, specs)
    return
  with LocalCluster(num_workers=_WORKERS.value,
                    cores_per_worker=_CORES.value, worker_gpus=gpus) as lc:
    print(f"TF servers: {', '.join(lc.to_cluster().device_names)}",
          flush=True)
    config = MeasureConfig(target=lc.target, steps=_STEPS.value)
    run(lc.to_cluster(), config, graphs, specs)


if __name__ == "__main__":
  run_app(main, sys.argv, "fidelity")
