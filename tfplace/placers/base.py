"""The interface every placer shares: heuristics, searches and learned placers.

A placer is a class registered under a CLI name (`@register_placer("m_etf")`
in `tfplace.placers.registry`) that declares

  * `kind`: what it is (`PlacerKind.HEURISTIC`, `SEARCH` or `LEARNED`), so
    experiments pick their placers by kind and a slow search never joins the
    baselines by accident;
  * `Options`: a frozen dataclass of its options, each with a default and
    documented in the dataclass docstring; the Python API passes an instance
    or a dict, the CLI `--placer_options key=value,...`;

and implements `place(problem, seed)`, which returns a `Placement` of the
problem's graph on its cluster. The pipeline (`tfplace.pipeline`) validates
the placement and simulates it; a placer need not do either.
`place_candidates(problem, k, seed)` gives up to k distinct placements, best
first (a search keeps its k best; a one-pass placer has one): what a
verification on real runs measures.
"""

import abc
import dataclasses
import enum
from typing import TYPE_CHECKING, ClassVar, List, Optional

from tfplace.placement import Placement

if TYPE_CHECKING:
  from tfplace.placers.problem import PlacementProblem


class PlacerKind(str, enum.Enum):
  """What a placer is: a one-pass heuristic, a search, or a learned policy."""
  HEURISTIC = "heuristic"
  SEARCH = "search"
  LEARNED = "learned"


@dataclasses.dataclass(frozen=True)
class NoOptions:
  """This placer has no options."""


class Placer(abc.ABC):
  """Assigns every op of a graph to a device of a cluster.

  A placer must return a placement that passes `Placement.validate(graph,
  cluster)`: colocation groups whole, kernels available. It should respect
  device memory where it can (a placement that cannot fit is reported by the
  simulator as infeasible, never silently accepted).

  Attributes:
    name: the CLI name (set by `register_placer`).
    kind: heuristic, search or learned.
    uses_seed: False for a placer whose placement does not depend on the
      seed (the CLI says so when `--seed` is given).
    Options: the frozen dataclass of this placer's options.
    options: this instance's options.
  """

  name: ClassVar[str] = "placer"
  kind: ClassVar[PlacerKind] = PlacerKind.HEURISTIC
  uses_seed: ClassVar[bool] = True
  Options: ClassVar[type] = NoOptions

  def __init__(self, options=None):
    """Makes the placer.

    Args:
      options: an instance of `Options`; default `Options()`.
    """
    if options is None:
      options = self.Options()
    if not isinstance(options, self.Options):
      raise TypeError(f"{type(self).__name__} takes {self.Options.__name__}, "
                      f"got {type(options).__name__}")
    self.options = options

  @abc.abstractmethod
  def place(self, problem: "PlacementProblem",
            seed: Optional[int] = None) -> Placement:
    """Returns a placement of `problem.graph` on `problem.cluster`."""

  def place_candidates(self, problem: "PlacementProblem", k: int,
                       seed: Optional[int] = None) -> List[Placement]:
    """Up to `k` distinct placements, the one `place` returns first.

    A one-pass placer has one; search placers return the best distinct
    placements their search saw.
    """
    del k  # One placement.
    return [self.place(problem, seed)]
