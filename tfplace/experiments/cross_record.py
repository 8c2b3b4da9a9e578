"""Keep what a cross run measured; judge the calibration again on it.

On a shared machine one run of `scripts/fidelity.py --cross` sees the
machine of those minutes: the same placement measures up to 1.9x apart
from run to run, and the per-message cost moves 0.5-2.2x within one run
(WORKSPACE_NOTES.md, issue 13). Two versions of the calibration model,
each judged in its own live run, are judged on two machines. `save_record`
keeps everything a run measured: the calibration's (median) benchmark,
every run of the suite, every judged placement with its step times, and
the benchmark after each judged graph. `replay` then fits the calibration
again with today's code and judges it on the same measurements: a model
change is judged on fixed data first and confirmed live after.

The file (JSON; gzip-compressed when the path ends in ".gz"):

      {"format": "tfplace.cross_record/1",
       "cluster": {...Cluster.to_dict()...},
       "benchmark": {...ClusterBenchmark.to_dict()...},
       "benchmark_repeats": [{...ClusterBenchmark...}, ...],
       "suite": [GRAPH, ...],
       "judged": [dict(GRAPH, baselines=["m_topo", ...],
                       probe={...ClusterBenchmark...} or null), ...]}

      GRAPH = {"label": "calib_conv", "model": "calib_conv",
               "config": {"batch_size": 4, ...}, "fingerprint": "...",
               "runs": [{"label": "one device", "placement": {op: device},
                         "timing": {...StepTiming...} or null,
                         "error": null or "why it failed",
                         "round_step_times_s": [...]}, ...]}

("round_step_times_s", each round's median step, only in a run measured
in several rounds: `--rounds`, and in a suite's split runs since
2026-11-29, the first pass's, then the second's:
`calibration_runs.measure_splits_again`; "benchmark_repeats", the benchmarks
"benchmark" is the median of, only in records since 2026-11-27.)

A graph is kept as the registry model and config it was built from
(`tfplace.models.registry.build_model`) and rebuilt on load; its
fingerprint is checked, so a record outlives no change to the graph
builders silently. Every run keeps its op records (the fit reads the
one-device runs'; the split runs' show where a prediction went wrong): a
record of the default cross run is ~1 MB compressed.
"""

import dataclasses
import functools
import gzip
import json
from typing import Any, Mapping, Optional, Sequence, Tuple

from tfplace.cost.cluster import Cluster
from tfplace.errors import MeasureError
from tfplace.experiments.fidelity import CrossReport, evaluate, with_probe
from tfplace.graph.op_graph import OpGraph
from tfplace.io_utils import atomic_write
from tfplace.measurement.batch import MeasureOutcome
from tfplace.measurement.calibration_fit import FitBounds
from tfplace.measurement.calibration_runs import GraphRuns, report_from_runs
from tfplace.measurement.cluster_benchmark import ClusterBenchmark
from tfplace.measurement.timing import StepTiming
from tfplace.placement import Placement

FORMAT = "tfplace.cross_record/1"

# (registry model name, config overrides) of one graph.
GraphSpec = Tuple[str, Mapping[str, Any]]


@dataclasses.dataclass(frozen=True)
class JudgedRuns:
  """The measured placements of one judged graph.

  Attributes:
    runs: the graph and its (label, placement) and outcomes.
    baselines: labels of the baseline placements among them.
    probe: the cluster benchmark taken right after its runs (None: not
      probed).
  """
  runs: GraphRuns
  baselines: Tuple[str, ...]
  probe: Optional[ClusterBenchmark] = None


@dataclasses.dataclass(frozen=True)
class CrossRecord:
  """What one cross run measured.

  Attributes:
    cluster: the uncalibrated cluster the runs used.
    benchmark: the calibration's benchmark (median of its repeats).
    suite: the calibration suite's runs.
    judged: the judged graphs' runs.
    benchmark_repeats: the benchmarks `benchmark` is the median of (empty
      in records before 2026-11-27, third session).
  """
  cluster: Cluster
  benchmark: ClusterBenchmark
  suite: Tuple[GraphRuns, ...]
  judged: Tuple[JudgedRuns, ...]
  benchmark_repeats: Tuple[ClusterBenchmark, ...] = ()


def record_from_cross(cross: CrossReport, cluster: Cluster,
                      graphs: Sequence[OpGraph]) -> CrossRecord:
  """The measurements of a finished `run_cross` on `cluster`, whose judged
  graphs were `graphs` (in order).

  Raises:
    MeasureError: not one graph per judged report.
  """
  calibration = cross.calibration_report
  if len(graphs) != len(cross.reports):
    raise MeasureError(f"record_from_cross: {len(cross.reports)} graphs "
                       f"were judged, {len(graphs)} given")
  return CrossRecord(
      cluster, calibration.benchmark, tuple(calibration.graph_runs),
      tuple(JudgedRuns(GraphRuns(r.graph_name, g, r.placements, r.outcomes),
                       r.baselines, r.probe)
            for r, g in zip(cross.reports, graphs)),
      calibration.benchmark_repeats)


def save_record(path: str, record: CrossRecord,
                suite_specs: Sequence[GraphSpec],
                judged_specs: Sequence[GraphSpec]) -> None:
  """Writes `record` atomically.

  Args:
    path: the file (".gz": compressed).
    record: the measurements.
    suite_specs: (model, config overrides) of each suite graph, in order.
    judged_specs: the same for each judged graph.

  Raises:
    MeasureError: the specs do not match the record's graphs in number.
  """
  if (len(suite_specs) != len(record.suite)
      or len(judged_specs) != len(record.judged)):
    raise MeasureError(
        f"save_record: {len(record.suite)} suite graphs and "
        f"{len(record.judged)} judged graphs were measured, but "
        f"{len(suite_specs)} suite specs and {len(judged_specs)} judged "
        f"specs were given")
  data = {
      "format": FORMAT,
      "cluster": record.cluster.to_dict(),
      "benchmark": record.benchmark.to_dict(),
      "benchmark_repeats": [b.to_dict() for b in record.benchmark_repeats],
      "suite": [_graph_dict(r, spec)
                for r, spec in zip(record.suite, suite_specs)],
      "judged": [dict(_graph_dict(j.runs, spec),
                      baselines=list(j.baselines),
                      probe=j.probe.to_dict() if j.probe else None)
                 for j, spec in zip(record.judged, judged_specs)],
  }
  text = json.dumps(data)
  atomic_write(path, gzip.compress(text.encode()) if path.endswith(".gz")
               else text)


def load_record(path: str) -> CrossRecord:
  """Reads a record and rebuilds its graphs.

  Raises:
    MeasureError: the file is missing, unreadable or of another format, or
      a graph rebuilt from its spec is no longer the graph measured.
  """
  try:
    with open(path, "rb") as f:
      raw = f.read()
    data = json.loads(gzip.decompress(raw) if path.endswith(".gz") else raw)
  except FileNotFoundError:
    raise MeasureError(f"no cross record at {path}") from None
  except (OSError, ValueError, EOFError) as e:
    raise MeasureError(f"cannot read the cross record {path}: {e}") from None
  if not isinstance(data, dict) or data.get("format") != FORMAT:
    raise MeasureError(f"{path} is not a cross record (\"format\": "
                       f"\"{FORMAT}\")")
  try:
    return CrossRecord(
        Cluster.from_dict(data["cluster"]),
        ClusterBenchmark.from_dict(data["benchmark"]),
        tuple(_graph_runs(g, path) for g in data["suite"]),
        tuple(JudgedRuns(_graph_runs(g, path), tuple(g["baselines"]),
                         ClusterBenchmark.from_dict(g["probe"])
                         if g.get("probe") else None)
              for g in data["judged"]),
        tuple(ClusterBenchmark.from_dict(b)
              for b in data.get("benchmark_repeats", ())))
  except (KeyError, TypeError) as e:
    raise MeasureError(f"malformed cross record {path}: {e!r}") from None


def replay(record: CrossRecord, bounds: FitBounds = FitBounds()
           ) -> CrossReport:
  """Fits the calibration on the record's suite runs with today's code and
  judges it on the record's judged placements, as `run_cross` would have;
  no cluster is needed."""
  cluster, bench = record.cluster, record.benchmark
  fitted = report_from_runs(cluster, bench, record.suite, bounds,
                            benchmark_repeats=record.benchmark_repeats)
  reports = []
  for judged in record.judged:
    runs = judged.runs
    report = evaluate(runs.graph, cluster, fitted.calibration,
                      runs.placements, runs.outcomes, bench,
                      judged.baselines)
    inputs = next((o.timing.inputs for o in runs.outcomes if o.ok), ())
    report = dataclasses.replace(report, inputs=inputs)
    if judged.probe is not None:
      report = with_probe(report, runs.graph, cluster, bench, judged.probe)
    reports.append(report)
  return CrossReport(fitted, tuple(reports))


def _graph_dict(runs: GraphRuns, spec: GraphSpec) -> dict:
  model, config = spec
  return {
      "label": runs.label, "name": runs.graph.name, "model": model,
      "config": dict(config), "fingerprint": runs.graph.fingerprint,
      "runs": [_run_dict(label, p, o)
               for (label, p), o in zip(runs.placements, runs.outcomes)]}


def _run_dict(label: str, placement: Placement,
              outcome: MeasureOutcome) -> dict:
  run = {"label": label, "placement": dict(placement.devices),
         "timing": outcome.timing.to_dict() if outcome.ok else None,
         "error": outcome.error}
  if outcome.round_step_times_s:
    run["round_step_times_s"] = list(outcome.round_step_times_s)
  return run


@functools.lru_cache(maxsize=64)
def _build(model: str, config: Tuple[Tuple[str, Any], ...],
           name: str) -> OpGraph:
  """The graph of a spec, built once per process: records of one script
  name the same graphs, and building them is most of a load."""
  from tfplace.models.registry import build_model
  graph = build_model(model, **dict(config))
  graph.name = name
  return graph


def _graph_runs(data: dict, path: str) -> GraphRuns:
  config = {k: tuple(v) if isinstance(v, list) else v
            for k, v in data["config"].items()}
  graph = _build(data["model"], tuple(sorted(config.items())), data["name"])
  if graph.fingerprint != data["fingerprint"]:
    raise MeasureError(
        f"{path}: {data['model']} {config} now builds a different graph "
        f"(fingerprint {graph.fingerprint}, recorded {data['fingerprint']}); "
        f"the record was made with other graph builders: record a new run "
        f"with scripts/fidelity.py --cross --record FILE")
  placements, outcomes = [], []
  for run in data["runs"]:
    placements.append((run["label"], Placement(devices=run["placement"])))
    timing = (StepTiming.from_dict(run["timing"]) if run["timing"]
              else None)
    outcomes.append(MeasureOutcome(
        "", timing, run.get("error"),
        round_step_times_s=tuple(run.get("round_step_times_s", ()))))
  return GraphRuns(data["label"], graph, tuple(placements), tuple(outcomes))
