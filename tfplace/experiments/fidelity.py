"""How well the calibrated simulator predicts real step times.

For one graph on a running TF server cluster: measure a few calibration
placements, fit a `Calibration` from their op records (plus a link fit from
the comm benchmark), then predict and measure many other placements (every
baseline placer and random group placements) and compare: median absolute
relative error and Spearman rank correlation.

Predictions are the calibrated simulator's step times and nothing else: the
fixed cost per step and the host work per cross-device tensor are part of
the simulator's model (`Cluster.step_overhead_s`,
`Device.transfer_overhead_s`), fitted on the calibration runs only
(`tfplace.measurement.calibration_runs.report_from_runs`, the fit that
`tfplace calibrate` runs too); the evaluated placements never include a
calibration placement. Calibration and evaluated placements
are measured in one interleaved batch, so a shared machine's load drifting
during the run biases neither side.
"""

import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from tfplace.cost.cluster import Cluster
from tfplace.cost.calibrated import Calibration
from tfplace.experiments.compare_placers import (BASELINE_PLACERS,
                                                  compare_placers)
from tfplace.graph.op_graph import OpGraph
from tfplace.measurement.batch import measure_batch
from tfplace.measurement.calibration_fit import calibrated_simulator
from tfplace.measurement.calibration_runs import (CalibrationReport,
                                                  PredictedRun,
                                                  calibration_placements,
                                                  median_abs_rel_error,
                                                  random_group_placements,
                                                  report_from_runs)
from tfplace.measurement.comm_benchmark import LinkFit
from tfplace.measurement.config import MeasureConfig
from tfplace.measurement.feeds import resolve_inputs
from tfplace.measurement.timing import InputSource, describe_inputs
from tfplace.placement import Placement


@dataclasses.dataclass(frozen=True)
class FidelityReport:
  """Fidelity of the simulator on one graph.

  Attributes:
    graph_name: the graph.
    num_ops: its ops.
    rows: the evaluated placements, predicted vs measured.
    calibration: the calibration fitted on the calibration runs.
    median_abs_rel_error: over the measured rows.
    spearman: rank correlation of predicted and measured step times.
    calibration_report: the fit and its in-sample error.
    inputs: where the graph's inputs came from in every run (synthetic,
      the user's, or an in-graph pipeline; empty: the graph makes its own).
  """
  graph_name: str
  num_ops: int
  rows: Tuple[PredictedRun, ...]
  calibration: Calibration
  median_abs_rel_error: float
  spearman: float
  calibration_report: Optional[CalibrationReport] = None
  inputs: Tuple[InputSource, ...] = ()


def baseline_placements(graph: OpGraph, cluster: Cluster
                        ) -> List[Tuple[str, Placement]]:
  """The placement of every baseline placer that can place this graph on
  this cluster (`compare_placers.BASELINE_PLACERS`)."""
  comparison = compare_placers(graph, cluster, BASELINE_PLACERS,
                               progress=False)
  return [(run.placer, run.placement) for run in comparison.runs
          if run.placement is not None]


def _key(placement: Placement) -> Tuple:
  return tuple(sorted(placement.devices.items()))


def _dedupe(labelled: Sequence[Tuple[str, Placement]]):
  seen = set()
  out = []
  for label, p in labelled:
    if _key(p) in seen:
      continue
    seen.add(_key(p))
    out.append((label, p))
  return out


def predictor(graph: OpGraph, cluster: Cluster, calibration: Calibration):
  """A function Placement -> calibrated simulated step time (seconds)."""
  sim = calibrated_simulator(graph, cluster, calibration)
  return lambda p: float(sim.simulate(p.to_array(graph, cluster)).step_time_s)


def run_fidelity(graph: OpGraph, cluster: Cluster, config: MeasureConfig, *,
                 num_random: int = 16, num_calibration_random: int = 8,
                 link_fits: Optional[Dict[str, LinkFit]] = None,
                 cache_dir: Optional[str] = None, seed: int = 0,
                 feeds=None, feed_options=None) -> FidelityReport:
  """Calibrates on a few runs, then predicts and measures other placements.

  Args:
    graph: the graph to place.
    cluster: the (uncalibrated) cluster of the running servers.
    config: the servers' session target, warmup and timed steps per
      placement (the median is used), deadlines per placement.
    num_random: random group placements evaluated besides the baselines.
    num_calibration_random: random placements among the calibration runs.
    link_fits: link kind -> fitted latency/bandwidth (comm benchmark).
    cache_dir: measurement cache directory.
    seed: seed of the random placements.
    feeds: values for the graph's placeholders (see `measure_batch`).
    feed_options: how synthetic input values are made.

  Returns:
    The report over the evaluated placements, none of which is a
    calibration placement.
  """
  inputs = resolve_inputs(graph, feeds, feed_options)
  calib_set = calibration_placements(graph, cluster, seed,
                                     num_calibration_random)
  fitted_on = {_key(p) for _, p in calib_set}
  labelled = [(label, p) for label, p in _dedupe(
      baseline_placements(graph, cluster)
      + random_group_placements(graph, cluster, num_random, seed=seed))
              if _key(p) not in fitted_on]
  # One batch, calibration runs spread among the evaluated ones, so a
  # machine that slows down or speeds up mid-way biases neither side.
  order = interleave(len(calib_set), len(labelled))
  everything = list(calib_set) + list(labelled)
  measured = measure_batch(graph, [everything[i][1] for i in order], config,
                           cluster=cluster, cache_dir=cache_dir,
                           feeds=inputs)
  by_index = dict(zip(order, measured))
  calib_out = [by_index[i] for i in range(len(calib_set))]
  outcomes = [by_index[len(calib_set) + j] for j in range(len(labelled))]
  fitted = report_from_runs(graph, cluster, calib_set, calib_out, link_fits)
  calibration = fitted.calibration
  predict = predictor(graph, cluster, calibration)
  rows = tuple(
      PredictedRun(label, predict(p),
                   o.timing.median_step_time_s if o.ok else None, o.error,
                   cross_transfers(graph, p.to_array(graph, cluster)))
      for (label, p), o in zip(labelled, outcomes))
  med, rho = summarize(rows)
  return FidelityReport(graph.name, graph.num_ops, rows, calibration, med,
                        rho, fitted, inputs.sources)


def interleave(num_a: int, num_b: int) -> List[int]:
  """Indices 0..num_a-1 (list a) and num_a.. (list b) merged evenly: item i
  of a list of n sits at fraction (i + 0.5) / n of the order."""
  keys = ([((i + 0.5) / num_a, 0, i) for i in range(num_a)]
          + [((j + 0.5) / num_b, 1, num_a + j) for j in range(num_b)])
  return [k[2] for k in sorted(keys)]


def cross_transfers(graph: OpGraph, device_ids: np.ndarray) -> int:
  """Tensors sent between devices: distinct (tensor, destination device)."""
  producer, _, ptr, consumers = graph.tensors
  count = 0
  for t, p in enumerate(producer):
    dsts = set(device_ids[consumers[ptr[t]:ptr[t + 1]]].tolist())
    dsts.discard(int(device_ids[p]))
    count += len(dsts)
  return count


def summarize(rows: Sequence[PredictedRun]) -> Tuple[float, float]:
  """(median |relative error|, Spearman rho) over the measured rows."""
  from scipy import stats
  ok = [r for r in rows if r.abs_rel_error is not None]
  med = median_abs_rel_error(ok)
  if len(ok) < 3:
    return med, float("nan")
  rho = stats.spearmanr([r.predicted_s for r in ok],
                        [r.measured_s for r in ok]).statistic
  return med, float(rho)


def markdown_table(report: FidelityReport) -> str:
  """The per-placement table, predicted vs measured, in milliseconds."""
  lines = [f"### {report.graph_name} ({report.num_ops} ops)", "",
           f"inputs: {describe_inputs(report.inputs)}", "",
           "| placement | transfers | predicted ms | measured ms | abs error |",
           "|---|---:|---:|---:|---:|"]
  for r in report.rows:
    measured = f"{r.measured_s * 1e3:.2f}" if r.measured_s else f"failed: {r.error}"
    err = f"{r.abs_rel_error * 100:.1f} %" if r.abs_rel_error is not None else "-"
    lines.append(f"| {r.label} | {r.num_transfers} | "
                 f"{r.predicted_s * 1e3:.2f} | {measured} | {err} |")
  cal = report.calibration
  lines += ["", f"median abs error {report.median_abs_rel_error * 100:.1f} %, "
            f"Spearman {report.spearman:.3f}; calibration: compute scale "
            f"{dict(cal.compute_scale)}, overhead {dict(cal.launch_overhead_s)}, "
            f"link latency {_latency_us(cal):.1f} us, per-transfer host "
            f"overhead {_per_type_us(cal.transfer_overhead_s)}, "
            f"step overhead {cal.step_overhead_s * 1e3:.3f} ms, latency "
            f"{'overlapped' if cal.overlap_latency else 'holds the link'}"]
  if report.calibration_report is not None:
    fit = report.calibration_report
    lines += ["", f"in-sample median abs error on the {len(fit.runs)} "
              f"calibration runs: {fit.median_abs_rel_error * 100:.1f} %"]
  lines.append("")
  return "\n".join(lines)


def _per_type_us(values) -> str:
  return ", ".join(f"{k} {v * 1e6:.1f} us" for k, v in sorted(values.items()))


def _latency_us(calibration: Calibration) -> float:
  links = list(calibration.links.values())
  return links[0].latency_s * 1e6 if links else float("nan")
