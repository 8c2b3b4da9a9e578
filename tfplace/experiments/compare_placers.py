"""Run several placers on one graph and cluster, simulate each, keep the best.

This is the main job of tfplace on a benchmark: `scripts/place_model.py` calls
`compare_placers` and writes the winner as placement JSON and placed GraphDef.
"""

import dataclasses
import math
import time
from typing import Optional, Sequence, Tuple

from absl import logging
from tqdm.auto import tqdm

from tfplace.cost.cluster import Cluster
from tfplace.cost.op_costs import CostModel
from tfplace.errors import PlacementError, TfplaceError
from tfplace.graph.op_graph import OpGraph
from tfplace.placement import Placement


@dataclasses.dataclass(frozen=True)
class PlacerRun:
  """One placer's result.

  Attributes:
    placer: placer name.
    placement: the placement (None if the placer failed).
    step_time_s: simulated step time (inf if infeasible or failed).
    feasible: False when some device is out of memory.
    placement_time_s: wall time the placer took.
    error: the placer's error message, if it failed.
  """
  placer: str
  placement: Optional[Placement]
  step_time_s: float
  feasible: bool
  placement_time_s: float
  error: Optional[str] = None

  @property
  def text(self) -> str:
    """The cell text of a results table: seconds, "OOM" or "error"."""
    if self.error is not None:
      return "error"
    return f"{self.step_time_s:.4g}" if self.feasible else "OOM"


@dataclasses.dataclass(frozen=True)
class PlacerComparison:
  """All placers on one (graph, cluster), with the lower bound."""
  graph_name: str
  cluster_name: str
  num_ops: int
  lower_bound_s: float
  runs: Tuple[PlacerRun, ...]

  @property
  def best(self) -> Optional[PlacerRun]:
    """The feasible run with the smallest step time, or None."""
    ok = [r for r in self.runs if r.feasible and math.isfinite(r.step_time_s)]
    return min(ok, key=lambda r: r.step_time_s) if ok else None

  def to_markdown(self) -> str:
    lines = ["| placer | step time (s) | vs lower bound | placement time (s) |",
             "|---|---|---|---|"]
    for r in self.runs:
      ratio = (f"{r.step_time_s / self.lower_bound_s:.2f}x"
               if r.feasible and self.lower_bound_s > 0 else "")
      lines.append(f"| {r.placer} | {r.text} | {ratio} | "
                   f"{r.placement_time_s:.2f} |")
    lines.append(f"| lower bound | {self.lower_bound_s:.4g} | 1.00x | |")
    return "\n".join(lines) + "\n"

  def to_dict(self) -> dict:
    def number(x: float):
      return x if math.isfinite(x) else None
    best = self.best
    return {
        "graph": self.graph_name, "cluster": self.cluster_name,
        "num_ops": self.num_ops, "lower_bound_s": number(self.lower_bound_s),
        "best_placer": best.placer if best else None,
        "runs": [{"placer": r.placer, "step_time_s": number(r.step_time_s),
                  "feasible": r.feasible,
                  "placement_time_s": r.placement_time_s, "error": r.error}
                 for r in self.runs],
    }


def compare_placers(graph: OpGraph, cluster: Cluster, placers: Sequence[str],
                    cost_model: Optional[CostModel] = None, seed: int = 0,
                    progress: bool = True) -> PlacerComparison:
  """Places `graph` with each placer and simulates every placement.

  Args:
    graph: the training step.
    cluster: the devices.
    placers: placer names (`tfplace.placers.registry.list_placers()`).
    cost_model: per-op costs; default the analytical model.
    seed: seed for placers that use one.
    progress: show a tqdm bar.

  Returns:
    A `PlacerComparison`; a placer that fails is recorded, not raised.

  Raises:
    PlacementError: an unknown placer name (checked before any work).
    ClusterError: the model is larger than all devices' memory together.
  """
  from tfplace.cost.analytical import AnalyticalCostModel
  from tfplace.simulator.lower_bound import lower_bound
  from tfplace.cost.memory import check_model_fits
  from tfplace.simulator.simulator import Simulator
  from tfplace.placers.registry import get_placer
  placer_objs = [get_placer(name) for name in placers]
  check_model_fits(graph, cluster)
  costs = (cost_model or AnalyticalCostModel()).op_costs(graph, cluster)
  simulator = Simulator(graph, cluster, costs)
  runs = []
  for name, placer in tqdm(list(zip(placers, placer_objs)), desc="placers",
                           disable=not progress):
    runs.append(_run_one(graph, cluster, costs, simulator, name, placer, seed))
  return PlacerComparison(
      graph_name=graph.name, cluster_name=cluster.name, num_ops=graph.num_ops,
      lower_bound_s=float(lower_bound(graph, cluster, costs)), runs=tuple(runs))


def _run_one(graph, cluster, costs, simulator, name, placer, seed) -> PlacerRun:
  from tfplace.placers.registry import with_prediction
  start = time.perf_counter()
  try:
    placement = placer.place(graph, cluster, costs, seed=seed)
    elapsed = time.perf_counter() - start
    placement.validate(graph, cluster)
  except (TfplaceError, ValueError, RuntimeError) as e:
    logging.warning("placer %s failed on %s: %s", name, graph.name, e)
    return PlacerRun(name, None, math.inf, False,
                     time.perf_counter() - start, str(e))
  result = simulator.simulate(placement.to_array(graph, cluster))
  placement = with_prediction(placement.with_metadata(placer=name), cluster,
                              result)
  return PlacerRun(name, placement, float(result.step_time_s),
                   bool(result.feasible), elapsed)


def require_best(comparison: PlacerComparison) -> PlacerRun:
  """The best run, or a PlacementError when no placer found a feasible one."""
  best = comparison.best
  if best is None:
    raise PlacementError(
        f"no placer found a placement of {comparison.graph_name} that fits "
        f"on {comparison.cluster_name}")
  return best
