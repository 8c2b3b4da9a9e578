"""place a graph on a cluster with a placer.

usage: tfplace place GRAPH --cluster PRESET_OR_JSON --placer NAME
                     --out placement.json [--seed N] [--cost_model NAME]
                     [--calibration calibration.json] [--json]

Reads GRAPH (a .pb/.pbtxt GraphDef or a .meta MetaGraphDef), computes op
costs with --cost_model (default: analytical, or calibrated when
--calibration is given; a calibration also calibrates the cluster's links and
overheads), runs the placer, writes the placement JSON (atomically) and
prints the predicted step time.
"""

import json
import math
import sys
from typing import List

from absl import flags

from tfplace.errors import TfplaceError

_CLUSTER = flags.DEFINE_string(
    "cluster", None, "cluster preset name (see `tfplace clusters`) or a "
    "cluster JSON file")
_PLACER = flags.DEFINE_string(
    "placer", "m_etf", "placer name: one of `tfplace.placers.registry."
    "list_placers()` (e.g. single_gpu, round_robin, metis, expert, m_etf)")
_OUT = flags.DEFINE_string("out", None, "where to write the placement JSON")
_SEED = flags.DEFINE_integer("seed", None, "random seed for the placer")
_COST_MODEL = flags.DEFINE_string(
    "cost_model", None, "op cost model: analytical, grappler or calibrated "
    "(default: analytical, or calibrated when --calibration is given)")
_CALIBRATION = flags.DEFINE_string(
    "calibration", None, "optional calibration JSON (tfplace.calibration/1)")
_JSON = flags.DEFINE_bool("json", False, "print the result as one JSON object")


def main(argv: List[str]) -> None:
  """Runs `tfplace place`; see the module docstring."""
  from tfplace.cost import profiled
  from tfplace.cost.cost_models import get_cost_model
  from tfplace.cli.cluster_arg import load_cluster_arg
  from tfplace.graph.importers import import_graph
  from tfplace.placers import registry
  if len(argv) != 2:
    raise TfplaceError("expected exactly one GRAPH argument: tfplace place "
                       "GRAPH --cluster C --placer P --out placement.json")
  if not _CLUSTER.value:
    raise TfplaceError("--cluster is required (a preset name or JSON file)")
  if not _OUT.value:
    raise TfplaceError("--out is required (the placement JSON to write)")
  if _PLACER.value not in registry.list_placers():
    registry.get_placer(_PLACER.value)  # Raises, listing the names.
  cluster = load_cluster_arg(_CLUSTER.value)
  cost_model = get_cost_model(
      _COST_MODEL.value or ("calibrated" if _CALIBRATION.value
                            else "analytical"), _CALIBRATION.value)
  if _CALIBRATION.value:
    cluster = profiled.apply_calibration(
        cluster, profiled.Calibration.load(_CALIBRATION.value))
  graph = import_graph(argv[1])
  placement = registry.place(graph, cluster, placer=_PLACER.value,
                             cost_model=cost_model, seed=_SEED.value)
  placement.save(_OUT.value)
  _report(placement, _OUT.value)


def _report(placement, out: str) -> None:
  """Prints the step time and op counts per device."""
  meta = placement.metadata
  step = meta.predicted_step_time_s
  feasible = meta.extra.get("feasible")
  counts = placement.device_counts()
  if _JSON.value:
    sys.stdout.write(json.dumps({
        "out": out, "placer": meta.placer, "predicted_step_time_s": step,
        "feasible": feasible, "oom_devices": meta.extra.get("oom_devices", []),
        "ops_per_device": counts}) + "\n")
    return
  if step is not None and math.isfinite(step):
    text = f"predicted step time {step * 1e3:.3f} ms"
  elif feasible is False:
    text = ("infeasible: out of memory on "
            f"{', '.join(meta.extra.get('oom_devices', [])) or 'a device'}")
  else:
    text = "step time not predicted (no simulator)"
  sys.stdout.write(f"{meta.placer}: {text}; wrote {out}\n")
  for device, n in sorted(counts.items()):
    sys.stdout.write(f"  {device}: {n} ops\n")
