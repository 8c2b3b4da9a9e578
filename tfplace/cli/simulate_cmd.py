"""predicted step time of a placement.

usage: tfplace simulate GRAPH --cluster CLUSTER
                        --placement placement.json [--cost_model NAME]
                        [--calibration calibration.json] [--json]
                        [--loop_trip_counts LOOP=N,...]
                        [--batch_size N] [--input_shapes name=DxD,...]

Reads GRAPH (any form `tfplace.graph.importers.import_graph` reads), costs
it with --cost_model (default: analytical, or calibrated when --calibration
is given; a calibration also calibrates the cluster's links and overheads),
simulates the placement and prints the step time, the lower bound, memory
and busy time per device; with a calibration, also the share of the
predicted op time that rests on op types the calibration has not seen.
"""

import json
import sys
from typing import List

from absl import flags

from tfplace.cli import input_flags
from tfplace.cli.run_helpers import CLUSTER_HELP, LOOP_TRIP_COUNTS_HELP
from tfplace.errors import TfplaceError
from tfplace.units import format_bytes, format_seconds

_CLUSTER = flags.DEFINE_string("cluster", None, CLUSTER_HELP)
_PLACEMENT = flags.DEFINE_string("placement", None, "placement JSON file")
_CALIBRATION = flags.DEFINE_string(
    "calibration", None, "optional calibration JSON (tfplace.calibration/1)")
_COST_MODEL = flags.DEFINE_string(
    "cost_model", None, "op cost model: analytical, grappler or calibrated "
    "(default: analytical, or calibrated when --calibration is given)")
_JSON = flags.DEFINE_bool("json", False, "print the result as one JSON object")
flags.adopt_module_key_flags(input_flags)
_LOOP_TRIP_COUNTS = flags.DEFINE_string(
    "loop_trip_counts", None, LOOP_TRIP_COUNTS_HELP)


def main(argv: List[str]) -> None:
  """Runs `tfplace simulate`; see the module docstring."""
  from tfplace import pipeline
  from tfplace.cli.run_helpers import (calibration_coverage,
                                      cluster_and_cost_model,
                                      parse_loop_trip_counts)
  from tfplace.graph.importers import import_graph
  from tfplace.placement import Placement
  from tfplace.placers.problem import PlacementProblem
  if len(argv) != 2:
    raise TfplaceError("expected exactly one GRAPH argument: tfplace simulate "
                       "GRAPH --cluster C --placement placement.json")
  if not _PLACEMENT.value:
    raise TfplaceError("--placement is required")
  cluster, cost_model = cluster_and_cost_model(
      _CLUSTER.value, _COST_MODEL.value, _CALIBRATION.value)
  placement = Placement.load(_PLACEMENT.value)
  graph = import_graph(argv[1], loop_trip_counts=parse_loop_trip_counts(
      _LOOP_TRIP_COUNTS.value), **input_flags.import_kwargs())
  problem = PlacementProblem(graph, cluster,
                             cost_model.op_costs(graph, cluster))
  result = pipeline.evaluate(problem, placement)
  _report(result, problem.lower_bound_s, cluster,
          calibration_coverage(graph, cluster, cost_model, placement))


def _report(result, bound: float, cluster, coverage) -> None:
  from tfplace.cli.run_helpers import coverage_fields
  names = cluster.device_names
  out = {**result.to_dict(), "lower_bound_s": bound,
         **coverage_fields(coverage)}
  step = out["step_time_s"]
  if _JSON.value:
    sys.stdout.write(json.dumps(out) + "\n")
    return
  if step is None:
    where = ", ".join(out["oom_devices"]) or "(an op has no kernel on its device)"
    sys.stdout.write(f"infeasible: out of memory on {where}\n")
  else:
    sys.stdout.write(f"step time {format_seconds(step)} (lower bound "
                     f"{format_seconds(bound)})\n")
  if coverage is not None:
    sys.stdout.write(coverage.describe() + "\n")
  sys.stdout.write(f"bytes moved between devices: "
                   f"{format_bytes(result.bytes_moved)} in "
                   f"{result.num_transfers} transfers\n")
  for i, name in enumerate(names):
    mem = cluster.devices[i].memory_bytes
    sys.stdout.write(
        f"  {name}: busy {format_seconds(result.device_busy_s[i])}, peak "
        f"memory {format_bytes(result.peak_memory_bytes[i])} of "
        f"{format_bytes(mem)}\n")
