"""Cost models by name: what `--cost_model` chooses among.

    analytical  roofline from FLOPs, bytes and datasheet figures (default)
    grappler    TensorFlow grappler's op-level estimator (+ launch overhead)
    calibrated  the analytical model with a fitted calibration file

A calibration also changes the cluster (links, launch overheads): callers
apply `tfplace.cost.calibrated.apply_calibration` to the cluster themselves.
"""

from typing import Callable, Dict, List, Optional

from tfplace.cost.op_costs import CostModel
from tfplace.errors import TfplaceError

DEFAULT_COST_MODEL = "analytical"


def _analytical(calibration_path: Optional[str]) -> CostModel:
  del calibration_path  # Unused.
  from tfplace.cost.analytical import AnalyticalCostModel
  return AnalyticalCostModel()


def _grappler(calibration_path: Optional[str]) -> CostModel:
  del calibration_path  # Unused.
  from tfplace.cost.grappler_costs import GrapplerCostModel
  return GrapplerCostModel()


def _calibrated(calibration_path: Optional[str]) -> CostModel:
  from tfplace.cost import calibrated
  if not calibration_path:
    raise TfplaceError("the calibrated cost model needs a calibration file "
                       "(--calibration calibration.json)")
  return calibrated.CalibratedCostModel(calibrated.Calibration.load(
      calibration_path))


_MODELS: Dict[str, Callable[[Optional[str]], CostModel]] = {
    "analytical": _analytical,
    "grappler": _grappler,
    "calibrated": _calibrated,
}


def default_cost_model() -> CostModel:
  """The cost model used when none is given: the analytical roofline."""
  return get_cost_model(DEFAULT_COST_MODEL)


def list_cost_models() -> List[str]:
  """Names `get_cost_model` accepts."""
  return sorted(_MODELS)


def get_cost_model(name: str = DEFAULT_COST_MODEL,
                   calibration_path: Optional[str] = None) -> CostModel:
  """Builds the named cost model.

  Args:
    name: one of `list_cost_models()`.
    calibration_path: a tfplace.calibration/1 JSON file; required by
      "calibrated", ignored by the others.

  Returns:
    A `CostModel`.

  Raises:
    TfplaceError: unknown name, or "calibrated" without a calibration file.
    ClusterError: the calibration file is missing or malformed.
  """
  factory = _MODELS.get(name)
  if factory is None:
    raise TfplaceError(f"unknown cost model {name!r}; choose one of: "
                       f"{', '.join(list_cost_models())}")
  return factory(calibration_path)
