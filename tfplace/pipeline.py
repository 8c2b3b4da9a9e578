"""The placement pipeline, in one paragraph.

    costs → groups → place → validate → simulate → record

`place` checks that the model can fit the cluster at all, costs every op on
every device (the analytical model unless another is given), builds the
colocation groups, runs the chosen placer with its options, validates what
it returns (every op placed, colocation groups whole, kernels available),
simulates one training step of it, and records the prediction (step time,
feasibility, devices out of memory) in the placement's metadata.
`tfplace.place` is this function, every CLI verb that places calls it, and
the comparison behind the main job (`experiments.compare_placers`) runs
`run_placer` once per placer on one shared `PlacementProblem`.
"""

import dataclasses
import math
import time
from typing import Optional

import numpy as np
from absl import logging

from tfplace.cost.cluster import Cluster
from tfplace.cost.cost_models import default_cost_model
from tfplace.cost.op_costs import CostModel
from tfplace.graph.op_graph import OpGraph
from tfplace.placement import Placement
from tfplace.placers.base import Placer
from tfplace.placers.problem import PlacementProblem
from tfplace.placers.registry import get_placer
from tfplace.simulator.result import SimResult


@dataclasses.dataclass(frozen=True)
class PlacerRun:
  """What one placer gave on one problem.

  Attributes:
    placer: the placer's name.
    placement: the validated placement, its prediction in the metadata
      (None if the placer failed).
    result: the simulator's result for it (None if the placer failed).
    placement_time_s: wall time the placer took.
    error: the placer's error message, if it failed.
  """
  placer: str
  placement: Optional[Placement]
  result: Optional[SimResult]
  placement_time_s: float
  error: Optional[str] = None

  @property
  def step_time_s(self) -> float:
    """Simulated step time (inf if infeasible or failed)."""
    return math.inf if self.result is None else float(self.result.step_time_s)

  @property
  def feasible(self) -> bool:
    return self.result is not None and bool(self.result.feasible)

  @property
  def text(self) -> str:
    """The cell text of a results table: seconds, "OOM" or "error"."""
    if self.error is not None:
      return "error"
    return f"{self.step_time_s:.4g}" if self.feasible else "OOM"


def place(graph: OpGraph, cluster: Cluster, placer: str = "m_etf",
          options=None, cost_model: Optional[CostModel] = None,
          seed: Optional[int] = None) -> Placement:
  """Places `graph` on `cluster`; see the module docstring.

  Args:
    graph: the training step.
    cluster: the devices.
    placer: a placer name (`tfplace.placers.registry.list_placers()`).
    options: the placer's options: its `Options` instance, a dict, or
      "key=value,..." text; default its defaults.
    cost_model: per-op costs; default the analytical model.
    seed: random seed for placers that use one.

  Returns:
    The validated placement with `predicted_step_time_s`, `feasible` and
    `oom_devices` in its metadata.

  Raises:
    PlacementError: unknown placer, bad options, or an invalid result.
    ClusterError: the model is larger than all devices' memory together.
  """
  placer_obj = get_placer(placer, options)
  problem = PlacementProblem.build(graph, cluster, cost_model)
  return run_placer(problem, placer_obj, seed).placement


def run_placer(problem: PlacementProblem, placer: Placer,
               seed: Optional[int] = None) -> PlacerRun:
  """Runs one placer, validates and simulates its placement, records it."""
  start = time.perf_counter()
  placement = placer.place(problem, seed=seed)
  elapsed = time.perf_counter() - start
  placement = placement.with_metadata(placer=placer.name)
  result = evaluate(problem, placement)
  return PlacerRun(placer.name,
                   record_prediction(placement, problem.cluster, result),
                   result, elapsed)


def evaluate(problem: PlacementProblem, placement: Placement,
             record_schedule: bool = False) -> SimResult:
  """Validates `placement` for the problem's graph and cluster, then
  simulates it (every entry point that takes a placement comes here)."""
  placement.validate(problem.graph, problem.cluster)
  ids = placement.to_array(problem.graph, problem.cluster)
  return problem.simulator.simulate(ids, record_schedule)


def simulate(graph: OpGraph, cluster: Cluster, placement,
             cost_model: Optional[CostModel] = None,
             record_schedule: bool = False) -> SimResult:
  """The simulated step of `placement` (a Placement, or device ids per op).

  A `Placement` is validated first (ops, devices, kernels, colocation
  groups); device ids are checked against the graph and cluster sizes.

  Raises:
    PlacementError: the placement does not fit the graph or cluster.
  """
  costs = (cost_model or default_cost_model()).op_costs(graph, cluster)
  problem = PlacementProblem(graph, cluster, costs)
  if isinstance(placement, Placement):
    return evaluate(problem, placement, record_schedule)
  return problem.simulator.simulate(np.asarray(placement), record_schedule)


def record_prediction(placement: Placement, cluster: Cluster,
                      result: SimResult) -> Placement:
  """`placement` with the simulated step time (or infeasibility) and each
  used device's simulated peak memory recorded."""
  peaks = {name: int(peak) for name, peak in
           zip(cluster.device_names, result.peak_memory_bytes) if peak > 0}
  if result.feasible:
    return placement.with_metadata(
        predicted_step_time_s=float(result.step_time_s), feasible=True,
        oom_devices=(), predicted_peak_memory_bytes=peaks)
  oom = tuple(cluster.device_names[i] for i in result.oom_devices)
  logging.warning("placement %s is infeasible (out of memory on %s)",
                  placement.metadata.placer, ", ".join(oom) or "?")
  return placement.with_metadata(predicted_step_time_s=None, feasible=False,
                                 oom_devices=oom,
                                 predicted_peak_memory_bytes=peaks)
