"""The human expert placement of the seed papers.

Mirhoseini et al. (ICML 2017) compare against hand-made placements: for
RNNLM and NMT the LSTM layers are spread one per GPU (layer i on GPU
i mod #GPUs), the embeddings sit on the first GPU and the attention and
softmax on the last; Inception-V3 (and any model without layer scopes) runs
on a single GPU.

The rules read the name scopes of the benchmark builders in tfplace/models/:
RNNLM `embedding/`, `lstm_<i>/`, `softmax/`; NMT `encoder/embedding/`,
`encoder/layer_<i>/`, `decoder/embedding/`, `decoder/layer_<i>/`,
`attention/`, `softmax/`. A scope matches anywhere in an op name, so the
gradient ops (`gradients/lstm_0/...`) follow their forward ops.
"""

import collections
import re
from typing import List, Optional

from tfplace.graph.op_graph import OpGraph
from tfplace.placement import Placement
from tfplace.placers.base import Placer
from tfplace.placers.heuristics import fallback_device, fastest_device
from tfplace.placers.problem import PlacementProblem
from tfplace.placers.registry import register_placer

_LAYER_RE = re.compile(r"(?:^|/)(?:lstm|layer)_(\d+)/")
_FIRST_RE = re.compile(r"(?:^|/)embedding/")
_LAST_RE = re.compile(r"(?:^|/)(?:attention|softmax)/")


def scope_slot(name: str, num_gpus: int) -> Optional[int]:
  """Which GPU (0..num_gpus-1) the expert gives an op, or None if no rule.

  Layer scopes win over the others (an `lstm_0/.../softmax/` op stays with
  its layer); then embeddings (first GPU), then attention and softmax (last).
  """
  m = _LAYER_RE.search(name)
  if m:
    return int(m.group(1)) % num_gpus
  if _FIRST_RE.search(name):
    return 0
  if _LAST_RE.search(name):
    return num_gpus - 1
  return None


def _has_layers(graph: OpGraph) -> bool:
  return any(_LAYER_RE.search(op.name) for op in graph.ops)


@register_placer("expert")
class ExpertPlacer(Placer):
  """Hand-made placement of Mirhoseini et al., ICML 2017 (see module doc).

  A colocation group goes where most of its ops' rules send it (ties: the
  lower GPU); groups that no rule matches stay on the first GPU; ops without
  a GPU kernel go to the CPU. Without layer scopes, everything goes on the
  fastest GPU; without GPUs, on the CPU.
  """

  uses_seed = False

  def place(self, problem: PlacementProblem,
            seed: Optional[int] = None) -> Placement:
    graph, groups, cluster = problem.graph, problem.groups, problem.cluster
    gpus = cluster.devices_of_type("GPU")
    if not gpus:
      gpus = cluster.devices_of_type("CPU")[:1] or [0]
    if _has_layers(graph):
      slots = self._group_slots(graph, groups.members, len(gpus))
      preferred = [gpus[s] for s in slots]
    else:
      best = fastest_device(cluster, problem.costs, gpus)
      preferred = [best] * groups.num_groups
    devices = [fallback_device(groups, cluster, g, preferred[g])
               for g in range(groups.num_groups)]
    return problem.placement(devices, self.name)

  @staticmethod
  def _group_slots(graph: OpGraph, members, num_gpus: int) -> List[int]:
    slots = []
    for ops in members:
      votes = collections.Counter()
      for i in ops:
        slot = scope_slot(graph.ops[int(i)].name, num_gpus)
        if slot is not None:
          votes[slot] += 1
      if not votes:
        slots.append(0)
        continue
      top = max(votes.values())
      slots.append(min(s for s, v in votes.items() if v == top))
    return slots
