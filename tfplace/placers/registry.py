"""The placer registry: CLI name -> Placer class.

A placer module registers its class with the decorator

    @register_placer("m_etf")
    class METfPlacer(Placer): ...

The built-in placer modules are listed in `_BUILTIN_MODULES` and imported on
the first lookup; placer modules import TensorFlow and tf-agents lazily, so
listing the placers and their options stays cheap. A new placer: write its
module in `tfplace/placers/`, decorate its class, add the module here.
"""

import importlib
import textwrap
from typing import Callable, Dict, List, Optional

from tfplace.errors import PlacementError
from tfplace.placers.base import Placer, PlacerKind
from tfplace.placers.options import describe_options, make_options

_BUILTIN_MODULES = (
    "tfplace.placers.heuristics",
    "tfplace.placers.min_cut",
    "tfplace.placers.expert",
    "tfplace.placers.m_topo",
    "tfplace.placers.m_etf",
    "tfplace.placers.m_sct",
    "tfplace.placers.multi_objective",
    "tfplace.placers.local_search",
    "tfplace.placers.cross_entropy",
    "tfplace.placers.cp_sat",
    "tfplace.placers.colocrl",
    "tfplace.placers.hierarchical",
    "tfplace.placers.gdp",
    "tfplace.placers.mars",
    "tfplace.placers.placeto",
)

_REGISTRY: Dict[str, type] = {}
_loaded = False


def register_placer(name: str) -> Callable[[type], type]:
  """Class decorator: registers a `Placer` subclass under a CLI name.

  Sets the class attribute `name` to `name` as well.

  Raises:
    ValueError: another class is already registered under `name`.
  """
  def decorator(cls: type) -> type:
    previous = _REGISTRY.get(name)
    if previous is not None and (previous.__module__, previous.__qualname__) != (
        cls.__module__, cls.__qualname__):
      raise ValueError(f"placer {name!r} is already registered as "
                       f"{previous.__module__}.{previous.__qualname__}")
    cls.name = name
    _REGISTRY[name] = cls
    return cls
  return decorator


def _load_builtins() -> None:
  global _loaded
  if not _loaded:
    for module in _BUILTIN_MODULES:
      importlib.import_module(module)
    _loaded = True


def list_placers(kind: Optional[PlacerKind] = None) -> List[str]:
  """Names of the registered placers (of one kind, if given), sorted."""
  _load_builtins()
  return sorted(name for name, cls in _REGISTRY.items()
                if kind is None or cls.kind == kind)


def placer_class(name: str) -> type:
  """The class registered under `name`.

  Raises:
    PlacementError: unknown name (the message lists the known ones).
  """
  _load_builtins()
  cls = _REGISTRY.get(name)
  if cls is None:
    raise PlacementError(f"unknown placer {name!r}; available: "
                         f"{', '.join(list_placers())}")
  return cls


def get_placer(name: str, options=None) -> Placer:
  """A new placer by CLI name.

  Args:
    name: a name from `list_placers()`.
    options: None (defaults), the placer's `Options` instance, a dict of
      option values, or "key=value,..." text.

  Raises:
    PlacementError: unknown name, or bad options.
  """
  cls = placer_class(name)
  return cls(make_options(name, cls.Options, options))


def describe_placers() -> str:
  """Every placer with its kind and options, for `--help` texts."""
  lines = []
  for name in list_placers():
    cls = _REGISTRY[name]
    options = describe_options(cls.Options)
    lines.append(f"  {name} ({cls.kind.value})"
                 + ("" if options else ": no options"))
    for line in options:
      lines.extend(textwrap.wrap(line, 79, initial_indent="      ",
                                 subsequent_indent="          "))
  return "\n".join(lines)
