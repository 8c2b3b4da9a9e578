"""The placer registry: CLI name -> Placer class, and the top-level `place`.

A placer module registers its class with the decorator

    @register_placer("m_etf")
    class MEtfPlacer(Placer): ...

Modules are imported lazily: `_LAZY` maps each built-in name to
"module:Class", so `list_placers()` and `get_placer(name)` work without
importing every placer (and without TensorFlow). A name whose module does
not exist (yet) is left out of `list_placers()`.
"""

import importlib
import importlib.util
from typing import Callable, Dict, List, Optional, Tuple

from absl import logging

from tfplace.errors import PlacementError

# Built-in placers, imported on first use: name -> "module:Class" candidates
# (the first whose module exists is used; the class may also be found by its
# registered name).
_LAZY: Dict[str, Tuple[str, ...]] = {
    "single_cpu": ("tfplace.placers.heuristics:SingleCpuPlacer",),
    "single_gpu": ("tfplace.placers.heuristics:SingleGpuPlacer",),
    "round_robin": ("tfplace.placers.heuristics:RoundRobinPlacer",),
    "hash": ("tfplace.placers.heuristics:HashPlacer",),
    "critical_path": ("tfplace.placers.heuristics:CriticalPathPlacer",),
    "scotch": ("tfplace.placers.min_cut:ScotchPlacer",),
    "metis": ("tfplace.placers.min_cut:MetisPlacer",),
    "expert": ("tfplace.placers.expert:ExpertPlacer",),
    "m_topo": ("tfplace.placers.m_topo:MTopoPlacer",
               "tfplace.placers.baechi_topo:MTopoPlacer"),
    "m_etf": ("tfplace.placers.m_etf:METfPlacer",
              "tfplace.placers.baechi_etf:METfPlacer"),
    "m_sct": ("tfplace.placers.m_sct:MSctPlacer",
              "tfplace.placers.baechi_sct:MSctPlacer"),
}

# Classes registered with `register_placer` (or resolved from `_LAZY`).
_REGISTRY: Dict[str, type] = {}


def register_placer(name: str) -> Callable[[type], type]:
  """Class decorator: registers a `Placer` subclass under a CLI name.

  Sets the class attribute `name` to `name` as well.

  Args:
    name: the CLI name (e.g. "m_etf").

  Returns:
    The decorator, which returns the class unchanged otherwise.
  """
  def decorator(cls: type) -> type:
    previous = _REGISTRY.get(name)
    if previous is not None and previous is not cls:
      if (previous.__module__, previous.__qualname__) != (cls.__module__,
                                                          cls.__qualname__):
        raise ValueError(f"placer {name!r} is already registered as "
                         f"{previous.__module__}.{previous.__qualname__}")
    cls.name = name
    _REGISTRY[name] = cls
    return cls
  return decorator


def _module_exists(module: str) -> bool:
  try:
    return importlib.util.find_spec(module) is not None
  except (ImportError, ValueError):
    return False


def _lazy_target(name: str) -> Optional[Tuple[str, str]]:
  """(module, class) of the first existing candidate for `name`, or None."""
  for target in _LAZY.get(name, ()):
    module_name, class_name = target.split(":")
    if _module_exists(module_name):
      return module_name, class_name
  return None


def list_placers() -> List[str]:
  """Names of the available placers, sorted."""
  names = set(_REGISTRY)
  names.update(name for name in _LAZY if _lazy_target(name) is not None)
  return sorted(names)


def _resolve(name: str) -> type:
  if name in _REGISTRY:
    return _REGISTRY[name]
  target = _lazy_target(name)
  if target is not None:
    module = importlib.import_module(target[0])
    if name in _REGISTRY:  # The module registered it with the decorator.
      return _REGISTRY[name]
    cls = getattr(module, target[1], None) or _find_by_name(module, name)
    if cls is not None:
      _REGISTRY[name] = cls
      return cls
  raise PlacementError(f"unknown placer {name!r}; available: "
                       f"{', '.join(list_placers())}")


def _find_by_name(module, name: str) -> Optional[type]:
  """A class in `module` whose `name` attribute is `name`, if any."""
  for value in vars(module).values():
    if isinstance(value, type) and getattr(value, "name", None) == name:
      return value
  return None


def get_placer(name: str, **kwargs):
  """Returns a new placer by CLI name.

  Args:
    name: a name from `list_placers()`.
    **kwargs: passed to the placer's constructor.

  Raises:
    PlacementError: unknown name (the message lists the known ones).
  """
  cls = _resolve(name)
  try:
    return cls(**kwargs)
  except TypeError as e:
    raise PlacementError(
        f"placer {name!r}: bad options {kwargs}: {e}") from None


def place(graph, cluster, placer: str = "m_etf", cost_model=None,
          seed: Optional[int] = None):
  """Places `graph` on `cluster`: costs, placer, then a simulated step time.

  Args:
    graph: the `OpGraph`.
    cluster: the `Cluster`.
    placer: a placer name from `list_placers()`.
    cost_model: a `CostModel`; default the analytical model.
    seed: random seed for placers that use one.

  Returns:
    A validated `Placement`. Its metadata
    has `predicted_step_time_s` (None if the simulator finds the placement
    infeasible, with `extra["feasible"] = False` and the devices out of
    memory in `extra["oom_devices"]`).

  Raises:
    PlacementError: unknown placer, or the placer's result is invalid.
    ClusterError: the model is larger than all devices' memory together.
  """
  from tfplace.cost.memory import check_model_fits
  placer_obj = get_placer(placer)
  check_model_fits(graph, cluster)
  if cost_model is None:
    from tfplace.cost.analytical import AnalyticalCostModel
    cost_model = AnalyticalCostModel()
  costs = cost_model.op_costs(graph, cluster)
  placement = placer_obj.place(graph, cluster, costs, seed=seed)
  placement.validate(graph, cluster)
  if placement.metadata.placer is None:
    placement = placement.with_metadata(placer=placer)
  if placement.metadata.predicted_step_time_s is None:
    placement = with_prediction(
        placement, cluster, simulate_placement(graph, cluster, costs, placement))
  return placement


def simulate_placement(graph, cluster, costs, placement):
  """The simulator's `SimResult` for `placement`."""
  from tfplace.simulator.simulator import Simulator
  return Simulator(graph, cluster, costs).simulate(
      placement.to_array(graph, cluster))


def with_prediction(placement, cluster, result):
  """`placement` with the simulated step time (or infeasibility) recorded."""
  extra = dict(placement.metadata.extra)
  extra["feasible"] = bool(result.feasible)
  if not result.feasible:
    extra["oom_devices"] = [cluster.device_names[i] for i in result.oom_devices]
    logging.warning("placement %s is infeasible (out of memory on %s)",
                    placement.metadata.placer, extra["oom_devices"] or "?")
    return placement.with_metadata(extra=extra)
  return placement.with_metadata(
      predicted_step_time_s=float(result.step_time_s), extra=extra)
