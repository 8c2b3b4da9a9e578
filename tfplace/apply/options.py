"""How `tfplace.apply` applies a placement: one frozen options record."""

import dataclasses
from typing import Tuple

from tfplace.errors import PlacementError


@dataclasses.dataclass(frozen=True)
class ApplyOptions:
  """Options of `tfplace.apply`.

  Attributes:
    min_named_fraction: the least fraction of the traced step's ops that the
      placement must name; below it the placement was made for another step
      or model, and applying it is an error.
    strict: ops of the trace that the placement does not name are an error
      (by default they are counted and listed in the `ApplyReport` and TF's
      own placer places them).
    soft_placement: leave TF's soft device placement on while the placed
      step runs. Off by default: a device that cannot run an op is then an
      error instead of a silent run elsewhere.
    autograph: convert the step with AutoGraph, as `tf.function` does by
      default (Python control flow on tensors becomes TF control flow).
    disabled_rewrites: grappler passes turned off while the placed step runs
      (names of `tf.config.optimizer.set_experimental_options`). "remapping"
      fuses ops such as MatMul + BiasAdd into one even when the placement
      puts them on different devices, which moves one of them.
  """
  min_named_fraction: float = 0.5
  strict: bool = False
  soft_placement: bool = False
  autograph: bool = True
  disabled_rewrites: Tuple[str, ...] = ("remapping",)

  def __post_init__(self):
    if not 0.0 <= self.min_named_fraction <= 1.0:
      raise PlacementError("min_named_fraction must be in [0, 1], got "
                       f"{self.min_named_fraction}")
