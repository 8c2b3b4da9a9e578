"""Calibration on a running cluster: microbenchmarks, runs, fits, report.

`calibrate_on_cluster` is what `tfplace calibrate` runs: the cluster's
microbenchmarks (`cluster_benchmark.benchmark_cluster`), then for each
calibration graph (the shipped suite, `tfplace.models.calibration_suite`, or
graphs the caller chooses) its `suite_placements` measured with
`measure_rounds` (the split runs twice: `measure_splits_again`), the
per-op-type fit of `calibration_fit` on the op
records of the one-device runs, and the fitted simulator's in-sample error
on every run; on one-core server workers (rendezvous transfers) also each
worker's cost to start a Recv, from a profiled step
(`tfplace.measurement.recv_issue`). `tfplace.experiments.fidelity` judges the result on other
graphs.

Also here: placement generators shared with fidelity (`halves_placement`,
`random_group_placements`) and the predicted-vs-measured record
(`PredictedRun`).
"""

import dataclasses
import os
from typing import AbstractSet, Dict, List, Optional, Sequence, Tuple

import numpy as np

from tfplace.cost.calibrated import Calibration, apply_calibration
from tfplace.cost.cluster import Cluster
from tfplace.device_names import device_type_of
from tfplace.errors import MeasureError
from tfplace.graph.op_graph import OpGraph
from tfplace.measurement.machine_drift import benchmark_spread
from tfplace.measurement.batch import MeasureOutcome, measure_rounds
from tfplace.measurement.calibration_fit import (FitBounds,
                                                 calibrated_simulator,
                                                 calibration_from_benchmark,
                                                 fit_dispatch, fit_op_types,
                                                 fit_stall,
                                                 fit_trace_excess,
                                                 fit_transfer_figures,
                                                 kernel_free_types,
                                                 samples_from_timing)
from tfplace.measurement.cluster_benchmark import (BenchmarkConfig,
                                                   ClusterBenchmark,
                                                   benchmark_cluster,
                                                   median_benchmark)
from tfplace.measurement.config import MeasureConfig
from tfplace.measurement.loop_samples import loop_samples
from tfplace.measurement.recv_issue import with_recv_issue
from tfplace.placement import Placement


def random_group_placements(graph: OpGraph, cluster: Cluster, count: int,
                            seed: int = 0) -> List[Tuple[str, Placement]]:
  """Colocation groups sent to random devices, with a random bias each."""
  rng = np.random.default_rng(seed)
  out = []
  d = cluster.num_devices
  for k in range(count):
    weights = rng.dirichlet(np.ones(d) * 0.7)
    group_dev = rng.choice(d, size=graph.num_colocation_groups, p=weights)
    out.append((f"random_{k}", Placement.from_array(
        graph, cluster, group_dev[graph.group_of], placer="random")))
  return out


def halves_placement(graph: OpGraph, cluster: Cluster) -> Placement:
  """Colocation groups in topological order, cut into D contiguous parts."""
  order = graph.topo_order
  rank = np.empty(graph.num_ops, dtype=np.int64)
  rank[order] = np.arange(graph.num_ops)
  first = np.full(graph.num_colocation_groups, graph.num_ops)
  np.minimum.at(first, graph.group_of, rank)
  part = (np.argsort(np.argsort(first)) * cluster.num_devices
          // graph.num_colocation_groups)
  return Placement.from_array(graph, cluster, part[graph.group_of],
                              placer="halves")


def suite_placements(graph: OpGraph, cluster: Cluster, seed: int = 0,
                     splits: bool = True) -> List[Tuple[str, Placement]]:
  """The runs of one calibration graph: the whole graph on each device
  ("on_<i>": their op records feed the fit), the topological halves (few
  transfers) and one random group placement (many): the split runs that
  choose the per-message cost share and check transfers in-sample
  (`splits`; without them the one-device runs alone)."""
  out = [(f"on_{j}", Placement.from_array(
      graph, cluster, np.full(graph.num_ops, j, dtype=np.int32)))
         for j in range(cluster.num_devices)]
  if cluster.num_devices > 1 and splits:
    out.append(("halves", halves_placement(graph, cluster)))
    out += [("random", p) for _, p in random_group_placements(
        graph, cluster, 1, seed=seed + 1000)]
  return out


@dataclasses.dataclass(frozen=True)
class PredictedRun:
  """One measured placement: the calibrated simulator's step time vs the
  measured one (calibration runs and fidelity rows alike).

  Attributes:
    label: the placement's label ("on_1", "halves", "m_etf", ...).
    predicted_s: the calibrated simulator's step time (seconds).
    measured_s: the measured median step time, None if the run failed.
    error: the failure message of a failed run.
    num_transfers: cross-device tensors of the placement (0: not counted).
    uncalibrated_s: the uncalibrated prediction (the measured cluster with
      analytical costs), if computed.
  """
  label: str
  predicted_s: float
  measured_s: Optional[float]
  error: Optional[str] = None
  num_transfers: int = 0
  uncalibrated_s: Optional[float] = None

  @property
  def abs_rel_error(self) -> Optional[float]:
    if self.measured_s is None or not np.isfinite(self.predicted_s):
      return None
    return abs(self.predicted_s - self.measured_s) / self.measured_s


def median_abs_rel_error(runs: Sequence[PredictedRun]) -> float:
  """Median |predicted - measured| / measured over the measured runs (nan if
  none was measured)."""
  errors = [r.abs_rel_error for r in runs if r.abs_rel_error is not None]
  return float(np.median(errors)) if errors else float("nan")


@dataclasses.dataclass(frozen=True)
class GraphRuns:
  """The measured calibration runs of one graph.

  Attributes:
    label: the graph's label in the report (its name, "#k" when repeated).
    graph: the graph.
    placements: (label, placement) per run.
    outcomes: the `MeasureOutcome` of each run, in the same order.
  """
  label: str
  graph: OpGraph
  placements: Tuple[Tuple[str, Placement], ...]
  outcomes: Tuple[MeasureOutcome, ...]


@dataclasses.dataclass(frozen=True)
class CalibrationReport:
  """A fitted calibration and how well it reproduces its own runs.

  Attributes:
    graph_names: the graphs it was fitted on.
    num_ops: their ops, summed.
    calibration: the fitted calibration.
    benchmark: the cluster's microbenchmarks.
    runs: every calibration run ("graph:placement"), predicted (in-sample)
      vs measured.
    median_abs_rel_error: median |predicted - measured| / measured over the
      measured runs: an in-sample figure (the fit saw their op records).
    num_samples: op records the fit used.
    graph_runs: the measured runs it was fitted on (what
      `tfplace.experiments.cross_record` keeps to fit again offline).
    benchmark_repeats: the benchmarks whose figures' medians are
      `benchmark` (before, amid and after the runs; empty when the
      benchmark was given): `machine_drift.benchmark_spread` of them says
      how steady the machine was while the calibration ran.
    message_fit: the transfer figures fitted on the split runs, in words
      (also at the end of the calibration's notes, which name the graphs).
    second_pass: what measuring the split runs again at the end changed,
      in words (`measure_splits_again`; empty when it did not run).
  """
  graph_names: Tuple[str, ...]
  num_ops: int
  calibration: Calibration
  benchmark: ClusterBenchmark
  runs: Tuple[PredictedRun, ...]
  median_abs_rel_error: float
  num_samples: int
  graph_runs: Tuple[GraphRuns, ...] = ()
  benchmark_repeats: Tuple[ClusterBenchmark, ...] = ()
  message_fit: str = ""
  second_pass: str = ""


def fit_from_runs(cluster: Cluster, bench: ClusterBenchmark,
                  runs: Sequence[GraphRuns],
                  bounds: FitBounds = FitBounds(), notes: str = ""
                  ) -> Tuple[Calibration, int, str]:
  """(calibration, op records used, the transfer figures fitted in words):
  the measured figures of `bench`, op types fitted on the one-device runs'
  op records (multi-device runs are left out: gRPC work shares the
  workers' cores and inflates their op durations), and, on a cluster with
  the link model, the shares of the per-message cost each end pays and of
  the time per byte the hosts spend, chosen on the multi-device runs
  (`calibration_fit.fit_transfer_figures`; with rendezvous transfers the
  measured costs are used as they are, with the extra latency per message
  those runs show beyond them), and the profiler's excess per op, from
  the short one-device runs
  (`calibration_fit.fit_trace_excess`). On launch-bound devices (whose
  benchmark measured launch costs: GPUs) the op types are fitted on the
  kernel times, and the stall per step and the dispatch per op come from
  their one-device runs (`calibration_fit.fit_stall`, `fit_dispatch`).

  Raises:
    MeasureError: no one-device run succeeded.
  """
  # The roofline at the same figures the calibration predicts with.
  measured = apply_calibration(cluster, calibration_from_benchmark(
      bench, cluster))
  traced = {d.device: d.traced_op_s for d in bench.devices}
  launch_bound = {d.device for d in bench.devices if d.launch_s}
  samples, single, split, timings = [], [], [], []
  for r in runs:
    for (_, p), o in zip(r.placements, r.outcomes):
      if not o.ok:
        continue
      run = (r.graph, p.to_array(r.graph, cluster),
             o.timing.median_step_time_s)
      if len(set(p.devices.values())) == 1:
        samples += samples_from_timing(r.graph, measured, o.timing, traced,
                                       launch_bound)
        samples += loop_samples(r.graph, measured, o.timing, traced,
                                launch_bound)
        single.append(run)
        timings.append((device_type_of(next(iter(p.devices.values()))),
                        o.timing))
      else:
        split.append(run)
  if not samples:
    errors = [o.error for r in runs for o in r.outcomes if not o.ok]
    raise MeasureError("no one-device calibration run succeeded"
                       + (f": {errors[0]}" if errors else ""))
  op_types = fit_op_types(samples, bounds)
  in_loops = [s for s in samples if s.in_loop]
  loop_op_types = fit_op_types(in_loops, bounds) if in_loops else {}
  kernel_free = kernel_free_types(
      samples, {d.type for d in measured.devices if d.name in launch_bound})
  share, byte_share, extra = fit_transfer_figures(
      cluster, bench, op_types, split, loop_op_types=loop_op_types)
  message_fit = (f"per-message cost share {share:.2f}, per-byte host share "
                 f"{byte_share:.2f}, extra latency per message "
                 f"{extra * 1e6:.0f} us" if split else
                 "no split run: the message figures as benchmarked")
  calibration = calibration_from_benchmark(
      bench.with_message_share(share, byte_share, extra), cluster, op_types,
      notes or f"fitted from {len(samples)} op records of "
      f"{', '.join(r.label for r in runs)} on {cluster.name}; {message_fit}",
      kernel_free, loop_op_types)
  excess = fit_trace_excess(cluster, calibration, single, bounds)
  calibration = dataclasses.replace(
      calibration, trace_excess_s=excess,
      stall_s=fit_stall(timings, calibration.launch_s, bounds))
  dispatch = fit_dispatch(cluster, calibration, single, bounds)
  return (dataclasses.replace(calibration, dispatch_s=dispatch), len(samples),
          message_fit)


def report_from_runs(cluster: Cluster, bench: ClusterBenchmark,
                     runs: Sequence[GraphRuns],
                     bounds: FitBounds = FitBounds(),
                     notes: str = "",
                     benchmark_repeats: Sequence[ClusterBenchmark] = ()
                     ) -> CalibrationReport:
  """`fit_from_runs`, then the fitted simulator on every run
  (`benchmark_repeats`: the benchmarks `bench` is the median of, kept in
  the report)."""
  calibration, num_samples, message_fit = fit_from_runs(cluster, bench, runs,
                                                        bounds, notes)
  spread = benchmark_spread(benchmark_repeats)
  if spread is not None:
    calibration = dataclasses.replace(calibration,
                                      benchmark_spread=spread.to_dict())
  predicted = []
  for r in runs:
    sim = calibrated_simulator(r.graph, cluster, calibration)
    ids = np.stack([p.to_array(r.graph, cluster) for _, p in r.placements])
    for (label, _), pred, o in zip(r.placements, sim.simulate_batch(ids),
                                   r.outcomes):
      predicted.append(PredictedRun(
          f"{r.label}:{label}", float(pred),
          o.timing.median_step_time_s if o.ok else None, o.error))
  return CalibrationReport(
      tuple(r.label for r in runs), sum(r.graph.num_ops for r in runs),
      calibration, bench, tuple(predicted), median_abs_rel_error(predicted),
      num_samples, tuple(runs), tuple(benchmark_repeats), message_fit)


def graph_labels(graphs: Sequence[OpGraph]) -> List[str]:
  """Each graph's name, with "#k" added to the k-th repeat of a name."""
  seen: Dict[str, int] = {}
  out = []
  for g in graphs:
    k = seen.get(g.name, 0)
    seen[g.name] = k + 1
    out.append(g.name if k == 0 else f"{g.name}#{k}")
  return out


def _measure_graph(label: str, graph: OpGraph, cluster: Cluster,
                   config: MeasureConfig, splits: bool = True,
                   **measure_args) -> GraphRuns:
  """The `suite_placements` of one graph, measured (`measure_rounds`)."""
  placements = suite_placements(graph, cluster, splits=splits)
  outcomes = measure_rounds(graph, [p for _, p in placements], config,
                            cluster=cluster, **measure_args)
  return GraphRuns(label, graph, tuple(placements), tuple(outcomes))


# The calibration suite's graphs (`tfplace.models.calibration_suite`, by
# name) measured on each device alone: their runs are there for the op
# costs of the kinds the other graphs lack. The depthwise graphs' split
# runs, also measured, moved the extra latency per message fitted on the
# suite's split runs by one step (15 us), down in one record and up in the
# other, and with it every judged split (WORKSPACE_NOTES.md, issue 13): the
# message figures stay fitted on the other graphs' splits. The attention
# graphs, added later, were measured this way only.
ONE_DEVICE_ONLY = frozenset({"calib_depthwise", "calib_attention"})


def calibrate_on_cluster(graphs: Sequence[OpGraph], cluster: Cluster,
                         config: MeasureConfig, *,
                         bench: Optional[ClusterBenchmark] = None,
                         bench_config: BenchmarkConfig = BenchmarkConfig(),
                         bounds: FitBounds = FitBounds(),
                         cache_dir: Optional[str] = None,
                         progress: bool = True,
                         feeds: Optional[Sequence] = None,
                         feed_options=None, rounds: int = 1,
                         bench_repeats: int = 3,
                         one_device_only: AbstractSet[str] = ONE_DEVICE_ONLY
                         ) -> CalibrationReport:
  """Benchmarks the cluster, measures the calibration graphs, fits.

  Without a given `bench`, the cluster is benchmarked `bench_repeats` times
  spread over the calibration (before the first graph, then after equal
  shares of the graphs, the last after the second pass) and the figures'
  medians are used (`median_benchmark`): a burst of other load on a shared
  machine during one benchmark moves the per-message cost 1.5-2x. The
  split runs are measured a second time after the last graph
  (`measure_splits_again`), so a slow spell during the first pass does not
  set the message figures.

  Args:
    graphs: the calibration graphs (the suite: `tfplace.models.
      calibration_suite`; the calibration then describes the cluster, for
      any graph).
    cluster: the (uncalibrated) cluster of the running servers.
    config: the servers' session target, warmup and timed steps per
      placement (the median is used), deadlines per placement.
    bench: the cluster's microbenchmarks if already measured (None: run
      them now, `bench_repeats` times).
    bench_config: their sizes.
    bounds: the bounds of the per-op-type fit.
    cache_dir: measurement cache directory.
    progress: show tqdm bars.
    feeds: per graph, values for its placeholders (see `measure_batch`;
      None: synthetic values for every graph that has placeholders).
    feed_options: how synthetic input values are made.
    rounds: times each graph's runs are measured (`measure_rounds`: each
      placement's median round is kept).
    bench_repeats: benchmarks whose median is used (>= 1).
    one_device_only: names of graphs measured on each device alone, without
      split runs (default: the suite's, `ONE_DEVICE_ONLY`).

  Returns:
    The calibration, the microbenchmarks and the in-sample error.

  Raises:
    MeasureError: a microbenchmark failed, or no one-device run succeeded.
    FeedError: a feed does not fit its graph.
  """
  if not graphs:
    raise MeasureError("calibration needs at least one graph")
  if int(bench_repeats) != bench_repeats or bench_repeats < 1:
    raise MeasureError(f"bench_repeats must be an integer >= 1, got "
                       f"{bench_repeats!r}")
  feeds = list(feeds) if feeds is not None else [None] * len(graphs)
  # Counts of measured graphs after which the cluster is benchmarked again.
  again = set() if bench is not None else {
      max(1, round(len(graphs) * k / (bench_repeats - 1)))
      for k in range(1, bench_repeats)}
  benches = [bench] if bench is not None else [
      benchmark_cluster(cluster, config, bench_config, progress)]
  runs = []
  for i, (label, graph, fed) in enumerate(zip(graph_labels(graphs), graphs,
                                              feeds)):
    runs.append(_measure_graph(label, graph, cluster, config,
                               cache_dir=cache_dir, progress=progress,
                               feeds=fed, feed_options=feed_options,
                               rounds=rounds,
                               splits=graph.name not in one_device_only))
    if i + 1 in again and i + 1 < len(graphs):
      benches.append(benchmark_cluster(cluster, config, bench_config,
                                       progress=False))
  runs, second_pass = measure_splits_again(
      runs, cluster, config, cache_dir=cache_dir, progress=progress,
      feeds=feeds, feed_options=feed_options, rounds=rounds)
  if len(graphs) in again:
    benches.append(benchmark_cluster(cluster, config, bench_config,
                                     progress=False))
  measured = median_benchmark(benches)
  if bench is None:
    measured = with_recv_issue(measured, cluster, config)
  report = report_from_runs(
      cluster, measured, runs, bounds,
      benchmark_repeats=tuple(benches) if bench is None else ())
  return dataclasses.replace(report, second_pass=second_pass)


# A slow spell of a few tens of seconds on a shared machine sets the extra
# latency per message the split runs fit, and with it every judged split:
# in r64 (WORKSPACE_NOTES.md, issue 13) the first benchmark's link latency
# was 150 us (33-40 us in the later two) and the first three graphs' split
# runs measured 1.3-1.7x the run before's, in both of their back-to-back
# rounds, while their one-device runs did not move; the fit's 75 us (30 us
# in the runs around it) put the judged splits 1.07-1.40x over. So the
# split runs are measured once more after the last graph, in reverse
# order, and where the first pass took over SECOND_PASS_GAP times the
# second the second is kept (a slow spell only slows); otherwise the first
# (no bias where the machine is steady: min-of-two would be).
SECOND_PASS_GAP = 1.15


def measure_splits_again(runs: Sequence[GraphRuns], cluster: Cluster,
                         config: MeasureConfig, *,
                         cache_dir: Optional[str] = None,
                         feeds: Optional[Sequence] = None,
                         **measure_args) -> Tuple[List[GraphRuns], str]:
  """(runs, what changed in words): every multi-device run of `runs`
  measured again (graphs in reverse order; `measure_rounds` with
  `measure_args`, caching under `cache_dir`/second_pass), the second
  measurement kept where the first took over `SECOND_PASS_GAP` times as
  long or failed. Each run measured twice keeps both passes' median steps
  in `MeasureOutcome.round_step_times_s` (the first pass's, then the
  second's). `feeds`: per run, its graph's feeds (None: synthetic)."""
  feeds = list(feeds) if feeds is not None else [None] * len(runs)
  out = list(runs)
  total = kept = 0
  for i in reversed(range(len(runs))):
    r = runs[i]
    split = [j for j, (_, p) in enumerate(r.placements)
             if len(set(p.devices.values())) > 1]
    if not split:
      continue
    again = measure_rounds(
        r.graph, [r.placements[j][1] for j in split], config,
        cluster=cluster, feeds=feeds[i],
        cache_dir=cache_dir and os.path.join(cache_dir, "second_pass"),
        **measure_args)
    outcomes = list(r.outcomes)
    for j, second in zip(split, again):
      outcomes[j], took_second = _kept_pass(outcomes[j], second)
      total += 1
      kept += took_second
    out[i] = dataclasses.replace(r, outcomes=tuple(outcomes))
  if not total:
    return out, ""
  return out, (f"split runs measured again after the last graph: the "
               f"second pass kept for {kept} of {total} (the first over "
               f"{SECOND_PASS_GAP:.2f}x it, or failed)")


def _kept_pass(first: MeasureOutcome, second: MeasureOutcome
               ) -> Tuple[MeasureOutcome, bool]:
  """(the outcome kept, whether it is the second pass's)."""
  if not second.ok:
    return first, False
  took_second = not first.ok or (
      first.timing.median_step_time_s
      > SECOND_PASS_GAP * second.timing.median_step_time_s)
  times = tuple(o.round_step_times_s or (o.timing.median_step_time_s,)
                for o in (first, second) if o.ok)
  return dataclasses.replace(second if took_second else first,
                             round_step_times_s=sum(times, ())), took_second
