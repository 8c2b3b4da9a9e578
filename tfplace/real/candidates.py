"""The placements a verification measures: a placer's best few and the best
heuristic.

`Placer.place_candidates` gives the placer's K best distinct placements on
the simulator (a search's K best; a one-pass heuristic's one, here topped up
with the next best heuristics, as the other natural candidates). The best
heuristic (the fastest on the simulator of every heuristic placer) is the
reference every candidate is measured against; it is measured once even
when it is one of the candidates.
"""

import dataclasses
import math
from typing import List, Optional, Tuple

from tfplace import pipeline
from tfplace.placement import Placement
from tfplace.placers.base import Placer, PlacerKind
from tfplace.placers.problem import PlacementProblem
from tfplace.placers.search_support import heuristic_placements


@dataclasses.dataclass(frozen=True)
class Candidate:
  """A placement to measure, with its prediction recorded.

  Attributes:
    label: e.g. "local_search #2", "m_etf".
    placement: validated, `predicted_step_time_s` in its metadata.
    predicted_s: its simulated step time (inf if infeasible).
  """
  label: str
  placement: Placement
  predicted_s: float


@dataclasses.dataclass(frozen=True)
class CandidateSet:
  """The candidates, in order, and which of them is the best heuristic.

  Attributes:
    candidates: the placer's (best first), then the best heuristic if it is
      not one of them.
    reference: index of the best heuristic.
    reference_placer: its placer's name.
  """
  candidates: Tuple[Candidate, ...]
  reference: int
  reference_placer: str


def _predicted(problem: PlacementProblem, placement: Placement,
               label: str) -> Candidate:
  result = pipeline.evaluate(problem, placement)
  recorded = pipeline.record_prediction(placement, problem.cluster, result)
  step = float(result.step_time_s) if result.feasible else math.inf
  return Candidate(label, recorded, step)


def heuristic_candidates(problem: PlacementProblem,
                         seed: Optional[int] = None) -> List[Candidate]:
  """Every heuristic placer's placement, fastest on the simulator first
  (those that fail are skipped; `search_support.heuristic_placements`)."""
  out = [_predicted(problem, placement.with_metadata(placer=name), name)
         for name, placement in heuristic_placements(problem, seed)]
  return sorted(out, key=lambda c: c.predicted_s)


def candidate_set(problem: PlacementProblem, placer: Placer, k: int,
                  seed: Optional[int] = None) -> CandidateSet:
  """Up to `k` distinct candidates of `placer` and the best heuristic."""
  found = placer.place_candidates(problem, k, seed)
  candidates = [_predicted(problem, p.with_metadata(placer=placer.name),
                           f"{placer.name} #{i + 1}" if len(found) > 1
                           else placer.name)
                for i, p in enumerate(found)]
  heuristics = heuristic_candidates(problem, seed)
  keys = [_key(problem, c.placement) for c in candidates]
  if placer.kind == PlacerKind.HEURISTIC:
    for h in heuristics:
      if len(candidates) < k and _key(problem, h.placement) not in keys:
        candidates.append(h)
        keys.append(_key(problem, h.placement))
  best = heuristics[0]
  best_key = _key(problem, best.placement)
  if best_key in keys:
    reference = keys.index(best_key)
    same = candidates[reference]
    label = (f"{same.label} (best heuristic)" if same.label == best.label
             else f"{same.label} = best heuristic ({best.label})")
    candidates[reference] = dataclasses.replace(same, label=label)
  else:
    candidates.append(dataclasses.replace(
        best, label=f"best heuristic ({best.label})"))
    reference = len(candidates) - 1
  return CandidateSet(tuple(candidates), reference, best.label)


def _key(problem: PlacementProblem, placement: Placement) -> bytes:
  return placement.to_array(problem.graph, problem.cluster).tobytes()
