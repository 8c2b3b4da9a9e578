"""Placement as a constraint program on a coarsened graph, solved by CP-SAT.

As in Pesto (Hafeez et al., Pesto: Efficient and Optimal Device Placement of
Deep Learning Models, Middleware 2021) and Moirai (Zhang et al., Moirai:
Towards Optimal Placement for Distributed Inference on Heterogeneous
Devices, 2023), which solve placement and scheduling exactly with (M)ILP
solvers on a coarsened graph; here with OR-Tools CP-SAT (model:
`cp_sat_model`): group-to-device assignment, device memory as a hard
constraint, start times, per-device no-overlap, a transfer delay on each
cross-device edge, minimize the makespan. The solver is time-limited and
warm-started from the start placement (a solution hint). Every solution it
finds is scored by the simulator (the model ignores link contention, memory
timing and overheads), and the best simulated placement is kept; the
solver's proven lower bound and gap are reported for the coarsened model.
The memory constraint charges parameters and a share of the activations
(`activation_fraction`).
"""

import dataclasses
import math
import os
import threading
from typing import List, Optional

import numpy as np

from tfplace.cost.cluster import Cluster
from tfplace.placers.cp_sat_model import TaskGraph, build_model, build_tasks
from tfplace.placers.registry import register_placer
from tfplace.placers.search_placer import (SearchContext, SearchOptions,
                                           SearchPlacer, config_from_options,
                                           search_options)
from tfplace.placers.search_support import (Budget, SearchResult, SearchRun,
                                            SearchSpace)

# Model time units per task-duration scale: the longest task sum is cut into
# about this many units (integer times).
_TIME_RESOLUTION = 200_000


@dataclasses.dataclass(frozen=True)
class CpSatConfig:
  """The solver's own knobs (the placer's options add budget and start).

  Attributes:
    num_workers: CP-SAT search workers (0: the machine's cores).
    hint: warm-start from the start placement.
  """
  num_workers: int = 0
  hint: bool = True


class _Collector:
  """Keeps every solution CP-SAT reports (read on the solver's thread)."""

  def __init__(self, built, num_groups: int, num_devices: int):
    from ortools.sat.python import cp_model  # Lazy: heavy import.
    outer = self

    class Callback(cp_model.CpSolverSolutionCallback):

      def on_solution_callback(self):
        devices = np.zeros(num_groups, np.int32)
        for (g, d), var in built.assign.items():
          if self.BooleanValue(var):
            devices[g] = d
        with outer.lock:
          outer.pending.append(devices)
          outer.objectives.append(self.ObjectiveValue())

    self.callback = Callback()
    self.lock = threading.Lock()
    self.pending: List[np.ndarray] = []
    self.objectives: List[float] = []

  def take(self) -> List[np.ndarray]:
    with self.lock:
      taken, self.pending = self.pending, []
    return taken


def _time_unit(tasks: TaskGraph) -> float:
  finite = np.where(np.isfinite(tasks.duration_s), tasks.duration_s, 0.0)
  scale = float(finite.max(axis=1).sum()) if tasks.num_tasks else 1.0
  return max(scale / _TIME_RESOLUTION, 1e-9)


def cp_sat_search(space: SearchSpace, tasks: TaskGraph, cluster: Cluster,
                  start: np.ndarray, budget: Budget,
                  config: CpSatConfig = CpSatConfig(),
                  seed: Optional[int] = None, progress: bool = True,
                  start_step_time_s: Optional[float] = None) -> SearchResult:
  """Solves the placement model of `tasks` (see the module docstring).

  Args:
    space: the groups (those of `tasks`), the evaluator, device memory.
    tasks: the task graph (`cp_sat_model.build_tasks`).
    cluster: devices and links.
    start: int [G], the start placement (hint and fallback).
    budget: the solver's time limit (and evaluations of its solutions).
    config: solver knobs.
    seed: the solver's random seed.
    progress: show a tqdm bar.
    start_step_time_s: the start's step time, if already known.

  Returns:
    The best simulated placement among the start and CP-SAT's solutions;
    `extra` has the solver's status, model makespan, bound and gap.
  """
  unit = _time_unit(tasks)
  fraction = activation_fraction(space.groups, np.asarray(start),
                                 space.capacity)
  memory = (space.groups.param_bytes
            + fraction * space.groups.output_bytes).astype(np.float64)
  built = build_model(tasks, space.allowed, memory, cluster, unit,
                      hint=np.asarray(start) if config.hint else None)
  solver = _solver(budget, config, seed)
  collector = _Collector(built, space.groups.num_groups,
                         len(cluster.devices))
  with SearchRun(space.evaluate, budget, start, start_step_time_s,
                 desc="cp_sat", progress=progress) as run:
    status = _solve(solver, built, collector, run)
  return run.result(activation_fraction=round(fraction, 4),
                    **_solver_figures(solver, status, built, collector,
                                      tasks))


def activation_fraction(groups, start: np.ndarray,
                        capacity: np.ndarray) -> float:
  """The share of activation bytes the model's memory constraint charges.

  The one memory estimate (parameters + every output) is conservative: on
  NMT it is ~5x the simulator's peak and rejects placements the simulator
  finds feasible. The fraction is the largest in [0, 1] with which the
  start placement still fits every device (1 when it fits as it is), so the
  hint is feasible and memory stays a hard constraint.
  """
  d = len(capacity)
  params = np.bincount(start, weights=groups.param_bytes, minlength=d)
  outputs = np.bincount(start, weights=groups.output_bytes, minlength=d)
  with np.errstate(divide="ignore", invalid="ignore"):
    room = np.where(outputs > 0, (capacity - params) / outputs, np.inf)
  return float(np.clip(room.min(initial=1.0), 0.0, 1.0))


def _solver(budget: Budget, config: CpSatConfig, seed: Optional[int]):
  from ortools.sat.python import cp_model  # Lazy: heavy import.
  solver = cp_model.CpSolver()
  solver.parameters.max_time_in_seconds = float(budget.seconds or 1e9)
  solver.parameters.num_workers = config.num_workers or os.cpu_count() or 1
  solver.parameters.random_seed = int(seed or 0)
  # Probing in presolve costs seconds on a few thousand tasks and finds
  # little here; without it the hinted solution is loaded at once.
  solver.parameters.cp_model_probing_level = 0
  return solver


def _solve(solver, built, collector: "_Collector", run: SearchRun):
  """Solves on a thread; meanwhile simulates each solution CP-SAT finds and
  stops the solver on Ctrl-C or when the evaluations are spent. Returns the
  solver's status."""
  outcome = {}
  thread = threading.Thread(target=lambda: outcome.setdefault(
      "status", solver.Solve(built.model, collector.callback)), daemon=True)
  thread.start()
  while thread.is_alive():
    thread.join(0.2)
    _score(run, collector)
    if run.interrupted or run.remaining_evaluations() == 0:
      solver.StopSearch()
  thread.join()
  _score(run, collector)
  return outcome.get("status")


def _score(run: SearchRun, collector: _Collector) -> None:
  """Simulates the solutions CP-SAT found since the last call."""
  solutions = collector.take()
  if solutions:
    run.evaluate(np.stack(solutions))


def _solver_figures(solver, status, built, collector: _Collector,
                    tasks: TaskGraph) -> dict:
  """Status, model makespan, proven bound and gap (seconds)."""
  from ortools.sat.python import cp_model  # Lazy: heavy import.
  name = solver.StatusName(status) if status is not None else "UNKNOWN"
  figures = {"algorithm": "cp_sat", "solver_status": name,
             "tasks": int(tasks.num_tasks),
             "solutions": len(collector.objectives)}
  if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
    objective = solver.ObjectiveValue() * built.time_unit_s
    bound = solver.BestObjectiveBound() * built.time_unit_s
    gap = (objective - bound) / objective if objective > 0 else 0.0
    figures.update(model_makespan_s=objective, model_bound_s=bound,
                   gap=round(max(gap, 0.0), 6))
  elif status == cp_model.INFEASIBLE:
    figures["gap"] = None
  if not math.isfinite(figures.get("model_makespan_s", 0.0)):
    figures.pop("model_makespan_s")
  return figures


@register_placer("cp_sat")
class CpSatPlacer(SearchPlacer):
  """Placement and scheduling as a constraint program, solved by CP-SAT.

  As Pesto (Hafeez et al., Middleware 2021) and Moirai (Zhang et al., 2023)
  solve placement with (M)ILP solvers on a coarsened graph; here OR-Tools
  CP-SAT on `coarsen_k` coarse groups: assignment, memory as a hard
  constraint (the one memory estimate), start times, per-device no-overlap,
  transfer delays across devices, minimum makespan, time-limited, hinted
  with the start placement. Every solution is simulated; the best simulated
  one is returned, with the solver's bound and gap for the coarsened model
  in the metadata. See the module docstring.
  """

  @search_options
  @dataclasses.dataclass(frozen=True)
  class Options(SearchOptions):
    """Options of `cp_sat`.

    Attributes:
      num_workers: CP-SAT search workers (0: the machine's cores).
      hint: warm-start the solver from the start placement.
    """
    coarsen_k: int = 64
    num_workers: int = 0
    hint: bool = True

  def _search(self, context: SearchContext, seed: Optional[int]
              ) -> SearchResult:
    problem, space = context.problem, context.space
    tasks = build_tasks(problem.graph, problem.costs, space.groups.group_of)
    start = context.start
    return cp_sat_search(space, tasks, problem.cluster, start, self.budget(),
                         config_from_options(CpSatConfig, self.options),
                         seed=seed, progress=self.options.progress,
                         start_step_time_s=context.start_step_time_s)
