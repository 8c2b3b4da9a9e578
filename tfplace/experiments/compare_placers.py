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
                    "m_etf", "m_sct", "multi_objective")
# The search placers (issue 9's honest bar for the learned placers).
SEARCH_PLACERS = ("local_search", "cross_entropy", "cp_sat")


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
        "runs": [dict({"placer": r.placer,
                       "step_time_s": json_number(r.step_time_s),
                       "feasible": r.feasible,
                       "placement_time_s": r.placement_time_s,
                       "error": r.error}, **_search_figures(r))
                 for r in self.runs],
    }

  def search_markdown(self) -> str:
    """The search placers' figures as a Markdown table ("" if none)."""
    rows = [(r, search_figures(r)) for r in self.runs if search_figures(r)]
    if not rows:
      return ""
    lines = ["| placer | start | start (s) | step time (s) | search (s) | "
             "evaluations | evaluations/s | CP-SAT gap |",
             "|---|---|---|---|---|---|---|---|"]
    for run, f in rows:
      gap = "" if f.get("gap") is None else f"{f['gap']:.1%}"
      start = f.get("start_step_time_s")
      lines.append(
          f"| {run.placer} | {f.get('start')} | "
          f"{'OOM' if start is None else f'{start:.4g}'} | {run.text} | "
          f"{f.get('seconds')} | {f.get('evaluations')} | "
          f"{f.get('evaluations_per_s')} | {gap} |")
    return "\n".join(lines) + "\n"


def search_figures(run: PlacerRun) -> dict:
  """A search run's figures (metadata "search", without the history)."""
  if run.placement is None:
    return {}
  search = run.placement.metadata.extra.get("search") or {}
  return {k: v for k, v in search.items() if k != "history"}


def _search_figures(run: PlacerRun) -> dict:
  figures = search_figures(run)
  return {"search": figures} if figures else {}


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
  return _compare(problem, placer_objs, seed, progress)


def _compare(problem: PlacementProblem, placer_objs, seed: int,
             progress: bool) -> PlacerComparison:
  runs = [_run_one(problem, placer, seed) for placer in
          tqdm(placer_objs, desc="placers", disable=not progress)]
  graph = problem.graph
  return PlacerComparison(
      graph_name=graph.name, cluster_name=problem.cluster.name,
      num_ops=graph.num_ops, lower_bound_s=problem.lower_bound_s,
      runs=tuple(runs))


def compare_with_searches(graph: OpGraph, cluster: Cluster,
                          placers: Sequence[str], searches: Sequence[str],
                          budget_s: float,
                          cost_model: Optional[CostModel] = None,
                          seed: int = 0, progress: bool = True,
                          search_options: Optional[Mapping[str, object]] = None
                          ) -> PlacerComparison:
  """`compare_placers` of the one-pass `placers`, then each search (or
  learned) placer started from the best of them (`init`) with `budget_s`
  seconds.

  Args:
    graph, cluster, cost_model, seed, progress: as `compare_placers`.
    placers: the one-pass placers (e.g. `BASELINE_PLACERS`).
    searches: search or learned placer names (e.g. `SEARCH_PLACERS`).
    budget_s: each search's budget in seconds.
    search_options: per search name, more options (a dict; its budget_s
      wins over `budget_s`).

  Returns:
    One comparison with every run, the searches last.

  Raises:
    PlacementError: unknown names or bad options (before any work).
    ClusterError: the model is larger than all devices' memory together.
  """
  extra = search_options or {}
  first = [get_placer(name) for name in placers]
  for name in searches:  # Bad names and options fail before any work.
    get_placer(name, {"budget_s": budget_s, **dict(extra.get(name, {}))})
  problem = PlacementProblem.build(graph, cluster, cost_model)
  baselines = _compare(problem, first, seed, progress)
  best = baselines.best
  init = best.placer if best is not None else "best_heuristic"
  later = [get_placer(name, {"budget_s": budget_s, "init": init,
                             "progress": progress, **dict(extra.get(name, {}))})
           for name in searches]
  searched = _compare(problem, later, seed, progress=False)
  return dataclasses.replace(baselines, runs=baselines.runs + searched.runs)


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
