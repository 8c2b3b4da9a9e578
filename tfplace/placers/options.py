"""Placer options from the Python API and the command line.

A placer's options are a frozen dataclass (`Placer.Options`). The API passes
an instance or a dict of field values; the CLI passes text,
`--placer_options key=value,key=value`, converted to each field's type (int,
float, bool, str, or Optional of those; "none" for None).
"""

import dataclasses
import typing
from typing import Any, Dict, List, Mapping, Union

from tfplace.errors import PlacementError

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def parse_option_text(text: str) -> Dict[str, str]:
  """"a=1,b=x" -> {"a": "1", "b": "x"}; raises PlacementError if malformed."""
  out: Dict[str, str] = {}
  for item in (text or "").split(","):
    if not item.strip():
      continue
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
      raise PlacementError(f"bad placer option {item.strip()!r}: use "
                           "key=value,key=value")
    out[key.strip()] = value.strip()
  return out


def make_options(placer_name: str, options_cls: type,
                 options: Union[None, str, Mapping[str, Any], object]):
  """An `options_cls` instance from None, an instance, a dict or "k=v,..." text.

  Raises:
    PlacementError: unknown option names (listing the known ones) or values
      that do not convert or that the dataclass rejects.
  """
  if options is None:
    return options_cls()
  if isinstance(options, options_cls):
    return options
  if isinstance(options, str):
    options = parse_option_text(options)
  if not isinstance(options, Mapping):
    raise PlacementError(f"placer {placer_name!r}: options must be a "
                         f"{options_cls.__name__}, a dict or 'key=value,...' "
                         f"text, got {type(options).__name__}")
  fields = {f.name: f for f in dataclasses.fields(options_cls)}
  unknown = sorted(set(options) - set(fields))
  if unknown:
    known = ", ".join(fields) or "none"
    raise PlacementError(f"placer {placer_name!r} has no option "
                         f"{', '.join(unknown)}; its options: {known}")
  hints = typing.get_type_hints(options_cls)
  values = {k: _convert(placer_name, k, v, hints[k]) for k, v in options.items()}
  try:
    return options_cls(**values)
  except (TypeError, ValueError) as e:
    raise PlacementError(f"placer {placer_name!r}: {e}") from None


def describe_options(options_cls: type) -> List[str]:
  """One line per option: "name (type, default value): its description"
  (the description from the dataclass docstring's Attributes section)."""
  hints = typing.get_type_hints(options_cls)
  docs = _attribute_docs(options_cls.__doc__ or "")
  lines = []
  for f in dataclasses.fields(options_cls):
    default = (f.default if f.default is not dataclasses.MISSING else
               f.default_factory() if f.default_factory is not dataclasses.MISSING
               else "required")
    text = f"{f.name} ({_type_name(hints[f.name])}, default {default!r})"
    lines.append(f"{text}: {docs[f.name]}" if f.name in docs else text)
  return lines


def _attribute_docs(doc: str) -> Dict[str, str]:
  """name -> description from a Google-style "Attributes:" section."""
  out: Dict[str, str] = {}
  lines = doc.expandtabs().splitlines()
  try:
    start = next(i for i, l in enumerate(lines) if l.strip() == "Attributes:")
  except StopIteration:
    return out
  indent, name = None, None
  for line in lines[start + 1:]:
    if not line.strip():
      break
    width = len(line) - len(line.lstrip())
    indent = width if indent is None else indent
    head, sep, rest = line.strip().partition(":")
    if width == indent and sep and " " not in head:
      name = head
      out[name] = rest.strip()
    elif width > indent and name:
      out[name] += " " + line.strip()
  return out


def _type_name(hint) -> str:
  args = typing.get_args(hint)
  if typing.get_origin(hint) is Union and type(None) in args:
    inner = [a for a in args if a is not type(None)]
    return f"{_type_name(inner[0])} or none"
  return getattr(hint, "__name__", str(hint))


def _convert(placer: str, key: str, value: Any, hint) -> Any:
  """`value` as type `hint` (text from the CLI, or a Python value)."""
  args = typing.get_args(hint)
  if typing.get_origin(hint) is Union and type(None) in args:
    if value is None or (isinstance(value, str) and value.lower() == "none"):
      return None
    hint = next(a for a in args if a is not type(None))
  if not isinstance(value, str) or hint is str:
    return value
  try:
    if hint is bool:
      if value.lower() in _TRUE:
        return True
      if value.lower() in _FALSE:
        return False
      raise ValueError(value)
    if hint in (int, float):
      return hint(value)
  except ValueError:
    raise PlacementError(f"placer {placer!r}: option {key} must be "
                         f"{_type_name(hint)}, got {value!r}") from None
  return value
