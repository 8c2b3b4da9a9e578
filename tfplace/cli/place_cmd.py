"""place a graph on a cluster with a placer.

usage: tfplace place GRAPH --cluster CLUSTER --placer NAME
                     [--placer_options key=value,...] --out placement.json
                     [--seed N] [--cost_model NAME] [--loop_trip_counts L=N]
                     [--calibration calibration.json] [--allow_infeasible]
                     [--json]

Reads GRAPH (a .pb/.pbtxt GraphDef or a .meta MetaGraphDef), computes op
costs with --cost_model (default: analytical, or calibrated when
--calibration is given; a calibration also calibrates the cluster's links and
overheads), runs the placer through the pipeline (costs, groups, place,
validate, simulate), writes the placement JSON (atomically) and prints the
predicted step time. A placement that does not fit in memory is an error
(exit 2, nothing written) unless --allow_infeasible.
"""

import json
import math
import sys
from typing import List

from absl import flags

from tfplace.cli.run_helpers import CLUSTER_HELP, LOOP_TRIP_COUNTS_HELP
from tfplace.errors import PlacementError, TfplaceError

_CLUSTER = flags.DEFINE_string("cluster", None, CLUSTER_HELP)
_PLACER = flags.DEFINE_string(
    "placer", "m_etf", "placer name (listed below with their options)")
_PLACER_OPTIONS = flags.DEFINE_string(
    "placer_options", "", "the placer's options, key=value,key=value "
    "(listed below)")
_OUT = flags.DEFINE_string("out", None, "where to write the placement JSON")
_SEED = flags.DEFINE_integer("seed", None, "random seed for the placer")
_COST_MODEL = flags.DEFINE_string(
    "cost_model", None, "op cost model: analytical, grappler or calibrated "
    "(default: analytical, or calibrated when --calibration is given)")
_CALIBRATION = flags.DEFINE_string(
    "calibration", None, "optional calibration JSON (tfplace.calibration/1)")
_ALLOW_INFEASIBLE = flags.DEFINE_bool(
    "allow_infeasible", False, "write the placement even if it does not fit "
    "in memory (exit 0)")
_JSON = flags.DEFINE_bool("json", False, "print the result as one JSON object")
_LOOP_TRIP_COUNTS = flags.DEFINE_string(
    "loop_trip_counts", None, LOOP_TRIP_COUNTS_HELP)


def extra_help() -> str:
  """The placers and their options, appended to `tfplace place --help`."""
  from tfplace.placers.registry import describe_placers
  return "placers (--placer) and their options (--placer_options):\n" + (
      describe_placers())


def main(argv: List[str]) -> None:
  """Runs `tfplace place`; see the module docstring."""
  from tfplace import pipeline
  from tfplace.cli.run_helpers import (calibration_coverage,
                                      cluster_and_cost_model,
                                      parse_loop_trip_counts)
  from tfplace.graph.importers import import_graph
  from tfplace.io_utils import check_out_path
  from tfplace.placers.registry import get_placer
  if len(argv) != 2:
    raise TfplaceError("expected exactly one GRAPH argument: tfplace place "
                       "GRAPH --cluster C --placer P --out placement.json")
  check_out_path(_OUT.value)
  get_placer(_PLACER.value, _PLACER_OPTIONS.value)  # Bad name/options first.
  cluster, cost_model = cluster_and_cost_model(
      _CLUSTER.value, _COST_MODEL.value, _CALIBRATION.value)
  graph = import_graph(argv[1], loop_trip_counts=parse_loop_trip_counts(
      _LOOP_TRIP_COUNTS.value))
  placement = pipeline.place(graph, cluster, placer=_PLACER.value,
                             options=_PLACER_OPTIONS.value,
                             cost_model=cost_model, seed=_SEED.value)
  if placement.metadata.feasible is False and not _ALLOW_INFEASIBLE.value:
    raise PlacementError(
        f"{_PLACER.value}'s placement does not fit in memory (out of memory on "
        f"{', '.join(placement.metadata.oom_devices) or 'a device'}); nothing "
        f"written to {_OUT.value}. Try another placer, a cluster with more "
        "memory, or --allow_infeasible to write it anyway")
  placement.save(_OUT.value)
  _report(placement, _OUT.value,
          calibration_coverage(graph, cluster, cost_model, placement))


def _report(placement, out: str, coverage) -> None:
  """Prints the step time and op counts per device (and, calibrated, the
  share of predicted op time on op types the calibration has not seen)."""
  from tfplace.cli.run_helpers import coverage_fields
  meta = placement.metadata
  step = meta.predicted_step_time_s
  counts = placement.device_counts()
  if _JSON.value:
    sys.stdout.write(json.dumps({
        "out": out, "placer": meta.placer, "predicted_step_time_s": step,
        "feasible": meta.feasible, "oom_devices": list(meta.oom_devices),
        "ops_per_device": counts, **coverage_fields(coverage)}) + "\n")
    return
  if step is not None and math.isfinite(step):
    text = f"predicted step time {step * 1e3:.3f} ms"
  else:
    text = ("infeasible: out of memory on "
            f"{', '.join(meta.oom_devices) or 'a device'}")
  sys.stdout.write(f"{meta.placer}: {text}; wrote {out}\n")
  if coverage is not None:
    sys.stdout.write(coverage.describe() + "\n")
  for device, n in sorted(counts.items()):
    sys.stdout.write(f"  {device}: {n} ops\n")
