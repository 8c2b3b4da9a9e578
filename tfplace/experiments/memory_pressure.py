"""Baechi's placers where memory binds: the published estimate against the
share checked on the simulator (`tfplace.placers.baechi_memory`).

A graph's accelerators are shrunk to fractions of its one-accelerator
simulated peak; each Baechi placer then places with Baechi's published
estimate (`activation_fraction=1, charge_received=False`), with the shares
checked on the simulator but received tensors left out
(`charge_received=False`), and with the default (shares and received
tensors), and each placement is simulated.
"""

import dataclasses
import math
import time
from typing import List, Sequence

import numpy as np

from tfplace.cost.cluster import Cluster
from tfplace.graph.op_graph import OpGraph
from tfplace.pipeline import run_placer
from tfplace.placers.problem import PlacementProblem
from tfplace.placers.registry import get_placer

BAECHI_PLACERS = ("m_topo", "m_etf", "m_sct")


@dataclasses.dataclass(frozen=True)
class PressureRow:
  """One placer at one memory size: published and default placements."""
  graph: str
  memory_fraction_of_peak: float
  placer: str
  published_s: float  # Simulated step time; inf if over memory.
  shares_only_s: float  # The shares, received tensors left out.
  default_s: float
  share: float  # The share the default kept (1 if memory did not bind).
  use_cpu: bool
  published_time_s: float  # Wall time of the placer.
  default_time_s: float


def one_accelerator_peak(problem: PlacementProblem) -> float:
  """Simulated peak bytes of the whole graph on the first accelerator."""
  cluster = problem.cluster
  accel = next(i for i, d in enumerate(cluster.devices) if d.type != "CPU")
  result = problem.simulator.simulate(
      np.full(problem.graph.num_ops, accel))
  return float(result.peak_memory_bytes[accel])


def shrunk(cluster: Cluster, memory_bytes: float) -> Cluster:
  """`cluster` with every accelerator's memory set to `memory_bytes`."""
  devices = tuple(dataclasses.replace(d, memory_bytes=int(memory_bytes))
                  if d.type != "CPU" else d for d in cluster.devices)
  return dataclasses.replace(cluster, devices=devices,
                             name=f"{cluster.name}-shrunk")


def pressure_rows(graph: OpGraph, cluster: Cluster,
                  fractions: Sequence[float],
                  placers: Sequence[str] = BAECHI_PLACERS
                  ) -> List[PressureRow]:
  """Rows for each fraction of the one-accelerator peak and placer."""
  peak = one_accelerator_peak(PlacementProblem.build(graph, cluster))
  rows = []
  for fraction in fractions:
    problem = PlacementProblem.build(graph, shrunk(cluster, peak * fraction))
    for name in placers:
      published, published_time = _timed(problem, name, {
          "activation_fraction": 1.0, "charge_received": False})
      shares_only, _ = _timed(problem, name, {"charge_received": False})
      default, default_time = _timed(problem, name, {})
      chosen = default.placement.metadata.extra.get("memory_share", {})
      rows.append(PressureRow(
          graph.name, fraction, name, published.step_time_s,
          shares_only.step_time_s, default.step_time_s,
          chosen.get("activation_fraction", 1.0),
          chosen.get("use_cpu", False), published_time, default_time))
  return rows


def _timed(problem, name, options):
  start = time.perf_counter()
  run = run_placer(problem, get_placer(name, options))
  return run, time.perf_counter() - start


def format_ms(seconds: float) -> str:
  return f"{seconds * 1e3:.1f}" if math.isfinite(seconds) else "over memory"
