"""How well the simulator predicts real step times.

Two experiments on a running TF server cluster:

* `run_cross` (`scripts/fidelity.py --cross`): calibrate once on the
  calibration suite (`tfplace calibrate`'s flow), then for every other graph
  place it with every baseline placer (on the calibrated costs), predict
  each placement and measure it. Per graph: median |relative error| and
  Spearman rank correlation of the calibrated predictions, the same for the
  uncalibrated ones (the measured cluster with analytical costs), whether
  the placement predicted best is, measured, within 5 % of the measured
  best, and the share of predicted op time resting on op types the
  calibration never saw. The judged graphs are never calibrated on.
* `run_fidelity` with no calibration: the older per-graph check, fitted on
  the graph's own one-device and split runs, judged on its other placements.

Calibration and evaluated placements of one graph are measured in one
interleaved batch, so a shared machine's load drifting during the run biases
neither side.
"""

import dataclasses
import math
from typing import List, Optional, Sequence, Tuple

import numpy as np

from tfplace.cost.analytical import AnalyticalCostModel
from tfplace.cost.calibrated import (Calibration, CalibratedCostModel,
                                     apply_calibration, calibration_coverage)
from tfplace.cost.cluster import Cluster
from tfplace.experiments.compare_placers import (BASELINE_PLACERS,
                                                  compare_placers)
from tfplace.graph.op_graph import OpGraph
from tfplace.measurement.batch import MeasureOutcome, measure_rounds
from tfplace.measurement.calibration_fit import calibrated_simulator
from tfplace.measurement.calibration_runs import (CalibrationReport,
                                                  GraphRuns, PredictedRun,
                                                  calibrate_on_cluster,
                                                  median_abs_rel_error,
                                                  random_group_placements,
                                                  report_from_runs,
                                                  suite_placements)
from tfplace.measurement.cluster_benchmark import (ClusterBenchmark,
                                                   benchmark_cluster)
from tfplace.measurement.config import MeasureConfig
from tfplace.measurement.feeds import resolve_inputs
from tfplace.measurement.machine_drift import (MachineDrift, drift_adjusted,
                                               machine_drift)
from tfplace.measurement.timing import InputSource
from tfplace.placement import Placement
from tfplace.simulator.simulator import Simulator

# The targets `scripts/fidelity.py --cross` checks (issue 13).
TARGET_MEDIAN_ERROR = 0.15
TARGET_SPEARMAN = 0.9
TARGET_BEST_REGRET = 0.05
TARGET_UNCALIBRATED_RATIO = 2.0


@dataclasses.dataclass(frozen=True)
class FidelityReport:
  """Fidelity of the simulator on one graph.

  Attributes:
    graph_name: the graph.
    num_ops: its ops.
    rows: one per evaluated placement.
    calibration: the calibration the predictions used.
    median_abs_rel_error: of the calibrated predictions.
    spearman: Spearman rho of calibrated predictions vs measurements.
    calibration_report: the per-graph calibration's own report, if fitted
      here.
    uncalibrated_median_abs_rel_error: of the measured cluster's analytical
      predictions (nan when not computed).
    uncalibrated_median_ratio: median predicted / measured of those.
    uncalibrated_spearman: their Spearman rho.
    best_regret: measured step of the baseline placement predicted best,
      over the best measured baseline step, minus 1 (nan: fewer than two
      measured baselines).
    predicted_best: that placement's label.
    measured_best: the measured best baseline's label.
    uncalibrated_share: share of the predicted op time (the predicted-best
      placement) on op types the calibration has not seen.
    inputs: where the graph's inputs came from in every run (synthetic,
      the user's, or an in-graph pipeline; empty: the graph makes its own).
    drift: how the machine changed from the calibration's benchmark to a
      benchmark right after this graph's runs (None: not probed).
    probe: that later benchmark.
    drift_adjusted_error: median abs error of the predictions with the
      calibration adjusted to `drift` (`machine_drift.drift_adjusted`; nan:
      not probed): the model's error without the machine's measured change.
    placements: (label, placement) of every row, in order.
    outcomes: the `MeasureOutcome` of every row (with `placements`, what
      `tfplace.experiments.cross_record` keeps to judge again offline).
    baselines: labels of the baseline placements among the rows.
    round_spread: how far the measurements repeat: over the placements
      measured in two or more rounds, the median of (slowest round /
      fastest round - 1) of their median steps (`round_spread`; nan:
      measured in one round). With two rounds it is the error a model that
      predicted one round exactly would make on the other.
    level: median predicted / measured of the calibrated predictions (the
      graph's level; nan: none measured).
    level_free_error: median abs error of the calibrated predictions once
      divided by `level`: how well the placements' steps are predicted
      relative to each other, which is what a placement search uses. On
      a shared machine the level also carries the machine's speed while
      the graph ran: measured twice in a row, a graph's placements moved
      together by up to ~20 % (WORKSPACE_NOTES.md, issue 13). A
      diagnostic, not a target.
  """
  graph_name: str
  num_ops: int
  rows: Tuple[PredictedRun, ...]
  calibration: Calibration
  median_abs_rel_error: float
  spearman: float
  calibration_report: Optional[CalibrationReport] = None
  uncalibrated_median_abs_rel_error: float = math.nan
  uncalibrated_median_ratio: float = math.nan
  uncalibrated_spearman: float = math.nan
  best_regret: float = math.nan
  predicted_best: str = ""
  measured_best: str = ""
  uncalibrated_share: float = math.nan
  inputs: Tuple[InputSource, ...] = ()
  drift: Optional[MachineDrift] = None
  probe: Optional[ClusterBenchmark] = None
  drift_adjusted_error: float = math.nan
  placements: Tuple[Tuple[str, Placement], ...] = ()
  outcomes: Tuple[MeasureOutcome, ...] = ()
  baselines: Tuple[str, ...] = ()
  round_spread: float = math.nan
  level: float = math.nan
  level_free_error: float = math.nan


def baseline_placements(graph: OpGraph, cluster: Cluster,
                        calibration: Optional[Calibration] = None
                        ) -> List[Tuple[str, Placement]]:
  """The placement of every baseline placer that can place this graph on
  this cluster (`compare_placers.BASELINE_PLACERS`), on the calibrated
  costs when a calibration is given."""
  model = None
  if calibration is not None:
    cluster = apply_calibration(cluster, calibration)
    model = CalibratedCostModel(calibration)
  comparison = compare_placers(graph, cluster, BASELINE_PLACERS,
                               cost_model=model, progress=False)
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


def uncalibrated_simulator(graph: OpGraph, measured: Cluster) -> Simulator:
  """The measured cluster with the analytical costs."""
  return Simulator(graph, measured,
                   AnalyticalCostModel().op_costs(graph, measured))


def evaluate(graph: OpGraph, cluster: Cluster, calibration: Calibration,
             labelled: Sequence[Tuple[str, Placement]], outcomes,
             bench: Optional[ClusterBenchmark] = None,
             baselines: Sequence[str] = BASELINE_PLACERS,
             calibration_report: Optional[CalibrationReport] = None
             ) -> FidelityReport:
  """Predicted vs measured for measured placements (no runs here).

  Args:
    graph: the graph.
    cluster: the uncalibrated cluster the runs used.
    calibration: the calibration to judge.
    labelled: (label, placement) per run.
    outcomes: the `MeasureOutcome` of each run.
    bench: the cluster's microbenchmarks, for the uncalibrated predictions.
    baselines: labels of the baseline placements (the best-placement check
      looks at these only).
    calibration_report: kept in the report.
  """
  sim = calibrated_simulator(graph, cluster, calibration)
  plain = (uncalibrated_simulator(graph, bench.apply(cluster))
           if bench is not None else None)
  rows = []
  for (label, p), o in zip(labelled, outcomes):
    ids = p.to_array(graph, cluster)
    predicted = sim.simulate(ids)
    rows.append(PredictedRun(
        label, float(predicted.step_time_s),
        o.timing.median_step_time_s if o.ok else None, o.error,
        predicted.num_transfers,
        float(plain.simulate(ids).step_time_s) if plain else None))
  rows = tuple(rows)
  med, rho = summarize(rows)
  plain_rows = [dataclasses.replace(r, predicted_s=r.uncalibrated_s)
                for r in rows if r.uncalibrated_s is not None]
  plain_med, plain_rho = summarize(plain_rows) if plain_rows else (
      math.nan, math.nan)
  ratios = [r.predicted_s / r.measured_s for r in plain_rows
            if r.measured_s and math.isfinite(r.predicted_s)]
  regret, predicted_best, measured_best = best_check(rows, baselines)
  share = _share(graph, cluster, calibration, labelled, predicted_best)
  level, level_free = level_and_rest(rows)
  return FidelityReport(
      graph.name, graph.num_ops, rows, calibration, med, rho,
      calibration_report, plain_med,
      float(np.median(ratios)) if ratios else math.nan, plain_rho, regret,
      predicted_best, measured_best, share, placements=tuple(labelled),
      outcomes=tuple(outcomes), baselines=tuple(baselines),
      round_spread=round_spread(outcomes), level=level,
      level_free_error=level_free)


def level_and_rest(rows: Sequence[PredictedRun]) -> Tuple[float, float]:
  """(median predicted / measured, median |error| of the predictions
  divided by that median) over the measured rows; (nan, nan) if none."""
  ratios = np.array([r.predicted_s / r.measured_s for r in rows
                     if r.measured_s and math.isfinite(r.predicted_s)])
  if not ratios.size:
    return math.nan, math.nan
  level = float(np.median(ratios))
  return level, float(np.median(np.abs(ratios / level - 1.0)))


def round_spread(outcomes: Sequence[MeasureOutcome]) -> float:
  """Median over the outcomes measured in two or more rounds of (slowest /
  fastest round's median step - 1); nan if none was."""
  spreads = [max(t) / min(t) - 1.0 for t in
             (o.round_step_times_s for o in outcomes)
             if len(t) > 1 and min(t) > 0]
  return float(np.median(spreads)) if spreads else math.nan


def _share(graph, cluster, calibration, labelled, label) -> float:
  placements = dict(labelled)
  if label not in placements:
    return math.nan
  calibrated = apply_calibration(cluster, calibration)
  costs = CalibratedCostModel(calibration).op_costs(graph, calibrated)
  ids = placements[label].to_array(graph, cluster)
  return calibration_coverage(graph, calibrated, calibration, costs,
                              ids).uncalibrated_share


def best_check(rows: Sequence[PredictedRun], baselines: Sequence[str]
               ) -> Tuple[float, str, str]:
  """(regret, predicted best, measured best) over the measured baseline
  rows: regret = measured step of the predicted best / the best measured
  step - 1 (nan with fewer than two measured baselines)."""
  ok = [r for r in rows if r.label in baselines and r.measured_s
        and math.isfinite(r.predicted_s)]
  if len(ok) < 2:
    return math.nan, "", ""
  predicted = min(ok, key=lambda r: r.predicted_s)
  measured = min(ok, key=lambda r: r.measured_s)
  return (predicted.measured_s / measured.measured_s - 1.0, predicted.label,
          measured.label)


def run_fidelity(graph: OpGraph, cluster: Cluster, config: MeasureConfig, *,
                 calibration: Optional[Calibration] = None,
                 bench: Optional[ClusterBenchmark] = None,
                 num_random: int = 16, cache_dir: Optional[str] = None,
                 seed: int = 0, feeds=None,
                 feed_options=None, rounds: int = 1) -> FidelityReport:
  """Measures and predicts the baseline and random placements of a graph.

  Args:
    graph: the graph to place.
    cluster: the (uncalibrated) cluster of the running servers.
    config: the servers' session target, warmup and timed steps per
      placement (the median is used), deadlines per placement.
    calibration: the calibration to judge (`run_cross`'s); None: fit one
      on this graph's own `suite_placements`, measured in the same batch
      and never evaluated.
    bench: the cluster's microbenchmarks (None: measured here).
    num_random: random group placements evaluated besides the baselines.
    cache_dir: measurement cache directory.
    seed: seed of the random placements.
    feeds: values for the graph's placeholders (see `measure_batch`).
    feed_options: how synthetic input values are made.
    rounds: times the batch is measured, in rotated orders; each
      placement's median round is kept (`measure_rounds`).
  """
  inputs = resolve_inputs(graph, feeds, feed_options)
  if bench is None:
    bench = benchmark_cluster(cluster, config, progress=False)
  baselines = baseline_placements(graph, cluster, calibration)
  calib_set = [] if calibration is not None else suite_placements(graph,
                                                                  cluster)
  fitted_on = {_key(p) for _, p in calib_set}
  labelled = [(label, p) for label, p in _dedupe(
      baselines + random_group_placements(graph, cluster, num_random,
                                          seed=seed))
              if _key(p) not in fitted_on]
  # One batch, calibration runs spread among the evaluated ones, so a
  # machine that slows down or speeds up mid-way biases neither side.
  order = interleave(len(calib_set), len(labelled))
  everything = list(calib_set) + list(labelled)
  measured = measure_rounds(graph, [everything[i][1] for i in order], config,
                            rounds=rounds, cluster=cluster,
                            cache_dir=cache_dir, feeds=inputs)
  by_index = dict(zip(order, measured))
  outcomes = [by_index[len(calib_set) + j] for j in range(len(labelled))]
  fitted = None
  if calibration is None:
    runs = GraphRuns(graph.name, graph, tuple(calib_set),
                     tuple(by_index[i] for i in range(len(calib_set))))
    fitted = report_from_runs(cluster, bench, [runs])
    calibration = fitted.calibration
  report = evaluate(graph, cluster, calibration, labelled, outcomes, bench,
                    [label for label, _ in baselines], fitted)
  return dataclasses.replace(report, inputs=inputs.sources)


@dataclasses.dataclass(frozen=True)
class CrossReport:
  """One calibration judged on graphs it never saw.

  Attributes:
    calibration_report: the calibration and its in-sample report.
    reports: one per judged graph.
  """
  calibration_report: CalibrationReport
  reports: Tuple[FidelityReport, ...]


def run_cross(graphs: Sequence[OpGraph], cluster: Cluster,
              config: MeasureConfig, calibration_graphs: Sequence[OpGraph],
              *, num_random: int = 0, cache_dir: Optional[str] = None,
              seed: int = 0, progress: bool = True,
              feed_options=None, probe_drift: bool = True,
              rounds: int = 1) -> CrossReport:
  """Calibrates once on `calibration_graphs`, then `run_fidelity` on each
  of `graphs` with that calibration (synthetic values for placeholders,
  made as `feed_options` says), each batch (the suite's and the judged
  graphs') measured `rounds` times. With `probe_drift`, the cluster is
  benchmarked again after each graph's runs and the change from the
  calibration's (median) benchmark kept in its report
  (`FidelityReport.drift`): the part of the error the calibration could not
  know of."""
  report = calibrate_on_cluster(calibration_graphs, cluster, config,
                                cache_dir=cache_dir, progress=progress,
                                feed_options=feed_options, rounds=rounds)
  bench = report.benchmark
  reports = []
  for g in graphs:
    judged = run_fidelity(g, cluster, config, calibration=report.calibration,
                          bench=bench, num_random=num_random,
                          cache_dir=cache_dir, seed=seed,
                          feed_options=feed_options, rounds=rounds)
    if probe_drift:
      judged = with_probe(judged, g, cluster, bench,
                          benchmark_cluster(cluster, config, progress=False))
    reports.append(judged)
  return CrossReport(report, tuple(reports))


def with_probe(report: FidelityReport, graph: OpGraph, cluster: Cluster,
               bench: ClusterBenchmark,
               probe: ClusterBenchmark) -> FidelityReport:
  """The report with `probe`, a benchmark of the cluster taken after the
  graph's runs: the machine's drift from the calibration's `bench`, and the
  median error of the report's placements predicted with the calibration
  adjusted to that drift."""
  drift = machine_drift(bench, probe)
  predict = predictor(graph, cluster,
                      drift_adjusted(report.calibration, drift))
  rows = [dataclasses.replace(r, predicted_s=predict(p))
          for r, (_, p) in zip(report.rows, report.placements)]
  return dataclasses.replace(report, drift=drift, probe=probe,
                             drift_adjusted_error=summarize(rows)[0])


def interleave(num_a: int, num_b: int) -> List[int]:
  """Indices 0..num_a-1 (list a) and num_a.. (list b) merged evenly: item i
  of a list of n sits at fraction (i + 0.5) / n of the order."""
  keys = ([((i + 0.5) / num_a, 0, i) for i in range(num_a)]
          + [((j + 0.5) / num_b, 1, num_a + j) for j in range(num_b)])
  return [k[2] for k in sorted(keys)]


def cross_transfers(graph: OpGraph, device_ids: np.ndarray) -> int:
  """Tensors read on another device: distinct (tensor, destination device)
  pairs (what a naive partition sends; TF sends fewer, and the simulator
  counts what TF sends: `SimResult.num_transfers`)."""
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
