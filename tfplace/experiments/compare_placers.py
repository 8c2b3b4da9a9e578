"""Run several placers on one graph and cluster, simulate each, keep the best.

This is the main job of tfplace on a benchmark: `scripts/place_model.py` calls
`compare_placers` and writes the winner as placement JSON and placed GraphDef.
Each placer runs through `tfplace.pipeline.run_placer` on one shared
`PlacementProblem` (costs, groups and simulator built once).
"""

import dataclasses
import math
import time
from typing import Mapping, Optional, Sequence, Tuple

from absl import logging
from tqdm.auto import tqdm

from tfplace.cost.cluster import Cluster
from tfplace.cost.op_costs import CostModel
from tfplace.errors import PlacementError, TfplaceError
from tfplace.graph.op_graph import OpGraph
from tfplace.io_utils import json_number
from tfplace.pipeline import PlacerRun, run_placer
from tfplace.placers.problem import PlacementProblem
from tfplace.placers.registry import get_placer

# The one-pass baselines the main job and the seed table compare (every
# heuristic placer tfplace has); searches and learned placers are added by
# name, with their budgets.
BASELINE_PLACERS = ("single_cpu", "single_gpu", "round_robin", "hash",
                    "critical_path", "scotch", "metis", "expert", "m_topo",
                    "m_etf", "m_sct")


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
    """The runs as a Markdown table, fastest first (failures last)."""
    lines = ["| placer | step time (s) | vs lower bound | placement time (s) |",
             "|---|---|---|---|"]
    for r in sorted(self.runs, key=_speed_order):
      ratio = (f"{r.step_time_s / self.lower_bound_s:.2f}x"
               if r.feasible and self.lower_bound_s > 0 else "")
      lines.append(f"| {r.placer} | {r.text} | {ratio} | "
                   f"{r.placement_time_s:.2f} |")
    lines.append(f"| lower bound | {self.lower_bound_s:.4g} | 1.00x | |")
    return "\n".join(lines) + "\n"

  def to_dict(self) -> dict:
    best = self.best
    return {
        "graph": self.graph_name, "cluster": self.cluster_name,
        "num_ops": self.num_ops,
        "lower_bound_s": json_number(self.lower_bound_s),
        "best_placer": best.placer if best else None,
        "runs": [{"placer": r.placer, "step_time_s": json_number(r.step_time_s),
                  "feasible": r.feasible,
                  "placement_time_s": r.placement_time_s, "error": r.error}
                 for r in self.runs],
    }


def _speed_order(run: PlacerRun):
  """Sort key: feasible runs by step time, then infeasible, then failures."""
  return (run.error is not None, not run.feasible, run.step_time_s, run.placer)


def compare_placers(graph: OpGraph, cluster: Cluster, placers: Sequence[str],
                    cost_model: Optional[CostModel] = None, seed: int = 0,
                    progress: bool = True,
                    options: Optional[Mapping[str, object]] = None
                    ) -> PlacerComparison:
  """Places `graph` with each placer and simulates every placement.

  Args:
    graph: the training step.
    cluster: the devices.
    placers: placer names (e.g. `BASELINE_PLACERS`).
    cost_model: per-op costs; default the analytical model.
    seed: seed for placers that use one.
    progress: show a tqdm bar.
    options: per placer name, its options (see `tfplace.pipeline.place`).

  Returns:
    A `PlacerComparison`; a placer that fails is recorded, not raised.

  Raises:
    PlacementError: an unknown placer name or bad options (checked before
      any work).
    ClusterError: the model is larger than all devices' memory together.
  """
  options = options or {}
  placer_objs = [get_placer(name, options.get(name)) for name in placers]
  problem = PlacementProblem.build(graph, cluster, cost_model)
  runs = [_run_one(problem, placer, seed) for placer in
          tqdm(placer_objs, desc="placers", disable=not progress)]
  return PlacerComparison(
      graph_name=graph.name, cluster_name=cluster.name, num_ops=graph.num_ops,
      lower_bound_s=problem.lower_bound_s, runs=tuple(runs))


def _run_one(problem: PlacementProblem, placer, seed: int) -> PlacerRun:
  """`run_placer`, with a failure recorded instead of raised."""
  start = time.perf_counter()
  try:
    return run_placer(problem, placer, seed)
  except (TfplaceError, ValueError, RuntimeError) as e:
    logging.warning("placer %s failed on %s: %s", placer.name,
                    problem.graph.name, e)
    return PlacerRun(placer.name, None, None, time.perf_counter() - start,
                     str(e))


def require_best(comparison: PlacerComparison) -> PlacerRun:
  """The best run, or a PlacementError when no placer found a feasible one."""
  best = comparison.best
  if best is None:
    raise PlacementError(
        f"no placer found a placement of {comparison.graph_name} that fits "
        f"on {comparison.cluster_name}")
  return best
