"""Min-cut placers: k-way graph partitioning with Scotch and METIS.

The colocation-group graph is partitioned into one part per GPU, with vertex
weight = compute time and edge weight = bytes crossing, balancing compute
while cutting few bytes; part k goes to GPU k. Groups that cannot run on a
GPU are forced to the CPU first. These are the "Scotch" and "MinCut"
baselines of Mirhoseini et al., ICML 2017 (Scotch: Pellegrini & Roman,
1996; METIS: Karypis & Kumar, 1998). Like those baselines they ignore
memory: an infeasible partition is reported by the simulator.
"""

import abc
import contextlib
import io
from typing import List, Optional

import numpy as np

from tfplace.grouping import partition
from tfplace.grouping.group_graph import GroupGraph
from tfplace.placement import Placement
from tfplace.placers.base import Placer
from tfplace.placers.heuristics import fallback_device
from tfplace.placers.problem import PlacementProblem
from tfplace.placers.registry import register_placer

class _MinCutPlacer(Placer, abc.ABC):
  """Shared flow: pick targets, force CPU-only groups, partition the rest."""

  @abc.abstractmethod
  def _partition(self, ptr: np.ndarray, nbr: np.ndarray, vweight: np.ndarray,
                 eweight: np.ndarray, nparts: int,
                 seed: Optional[int]) -> np.ndarray:
    """Part id per vertex of the undirected CSR graph."""

  def place(self, problem: PlacementProblem,
            seed: Optional[int] = None) -> Placement:
    groups, cluster = problem.groups, problem.cluster
    targets = cluster.devices_of_type("GPU") or list(range(cluster.num_devices))
    # Groups runnable on every target take part; the others are forced.
    free = np.flatnonzero(groups.allowed[:, targets].all(axis=1))
    devices = np.array([fallback_device(groups, cluster, g, targets[0])
                        for g in range(groups.num_groups)], dtype=np.int32)
    if len(targets) == 1:
      parts = np.zeros(len(free), dtype=np.int64)
    elif len(free) <= len(targets):  # Too few groups to partition.
      parts = np.arange(len(free))
    else:
      parts = self._partition_free(groups, free, targets, seed)
    devices[free] = np.array(targets)[parts]
    return problem.placement(devices, self.name)

  def _partition_free(self, groups: GroupGraph, free: np.ndarray,
                      targets: List[int], seed: Optional[int]) -> np.ndarray:
    """Partitions the subgraph induced by the `free` groups."""
    ptr, nbr, nbytes = partition.induced_csr(groups, free)
    vweight = partition.int_weights(
        groups.compute_s[free][:, targets].mean(axis=1))
    eweight = partition.int_weights(nbytes)
    parts = self._partition(ptr, nbr, vweight, eweight, len(targets), seed)
    return np.asarray(parts, dtype=np.int64)


@register_placer("metis")
class MetisPlacer(_MinCutPlacer):
  """k-way min-cut placement with METIS (Karypis & Kumar, 1998), the
  "MinCut" baseline of Mirhoseini et al., ICML 2017, via pymetis."""

  def _partition(self, ptr, nbr, vweight, eweight, nparts, seed):
    return partition.metis_parts(ptr, nbr, vweight, eweight, nparts, seed)


# Scotch 7's context options (scotch.h: SCOTCH_OPTIONNUMDETERMINISTIC and
# SCOTCH_OPTIONNUMRANDOMFIXEDSEED).
_SCOTCH_OPTION_DETERMINISTIC = 0
_SCOTCH_OPTION_RANDOM_FIXED_SEED = 1


@register_placer("scotch")
class ScotchPlacer(_MinCutPlacer):
  """k-way mapping with Scotch (Pellegrini & Roman, 1996), the "Scotch"
  baseline of Mirhoseini et al., ICML 2017, via pyscotch."""

  def _partition(self, ptr, nbr, vweight, eweight, nparts, seed):
    if len(nbr) == 0:
      return np.arange(len(vweight)) % nparts
    # pyscotch prints a banner when it first loads the library.
    with contextlib.redirect_stderr(io.StringIO()), \
        contextlib.redirect_stdout(io.StringIO()):
      import pyscotch  # Lazy: only this placer needs it.
      # Scotch 7 runs threaded and seeds from the clock unless its context
      # asks for determinism and a fixed seed.
      context, graph, bound = pyscotch.Context(), pyscotch.Graph(), None
    try:
      context.option_set(_SCOTCH_OPTION_DETERMINISTIC, 1)
      context.option_set(_SCOTCH_OPTION_RANDOM_FIXED_SEED, 1)
      context.random_seed(int(seed or 0))
      graph.build(ptr, nbr, velotab=vweight, edlotab=eweight)
      bound = context.bind_graph(graph)
      return np.asarray(bound.partition(nparts))
    finally:
      if bound is not None:
        bound.close()
      graph.close()
      context.close()
