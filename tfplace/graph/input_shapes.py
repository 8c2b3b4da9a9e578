"""Static shapes for a graph's placeholders, set before the graph is read.

A TF1 training graph usually takes its inputs from placeholders whose first
(batch) dimension is unknown (`[None, 784]`). Static shape inference then
leaves every activation's batch dimension unknown, and the importer would
cost the step at the importer's `unknown_dim` (1). `set_input_shapes` writes
the batch size (or whole shapes) into the placeholders' `shape` attributes
of a copy of the GraphDef, so that shape inference carries them through the
step: the costs, the simulated step time and the placed GraphDef are then
those of the batch the user trains with, and a real run of the placed
graph needs no `--batch_size` again.
"""

from typing import Dict, Mapping, Optional, Sequence, Tuple

from tfplace.errors import GraphImportError

# Ops whose value is fed by the client (and whose shape attr can be set).
PLACEHOLDER_OPS = ("Placeholder", "PlaceholderV2", "PlaceholderWithDefault")

Dims = Optional[Tuple[Optional[int], ...]]


def declared_shape(node) -> Dims:
  """A placeholder NodeDef's static dims (None where unknown); None when
  even the rank is unknown."""
  if "shape" not in node.attr:
    return None
  proto = node.attr["shape"].shape
  if proto.unknown_rank:
    return None
  return tuple(None if d.size < 0 else int(d.size) for d in proto.dim)


def fits(declared: Dims, given: Sequence[int]) -> bool:
  """Whether a full shape `given` is one the declared dims allow."""
  if declared is None:
    return True
  return len(declared) == len(given) and all(
      d is None or d == int(g) for d, g in zip(declared, given))


def set_input_shapes(graph_def, batch_size: Optional[int] = None,
                     input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
                     name: str = "graph"):
  """A copy of `graph_def` whose placeholders have the given static shapes.

  Args:
    graph_def: a `GraphDef` (not changed).
    batch_size: the size of every placeholder's unknown first dimension.
    input_shapes: placeholder name -> its full shape (overrides batch_size).
    name: the graph's name, for messages.

  Returns:
    The new GraphDef (the same object when there is nothing to set).

  Raises:
    GraphImportError: batch_size < 1; a name in `input_shapes` is not a
      placeholder of the graph; a given shape does not fit the declared one.
  """
  input_shapes = dict(input_shapes or {})
  if batch_size is None and not input_shapes:
    return graph_def
  if batch_size is not None and int(batch_size) < 1:
    raise GraphImportError(f"batch_size must be >= 1, got {batch_size}")
  out = type(graph_def)()
  out.CopyFrom(graph_def)
  placeholders = {n.name: n for n in out.node if n.op in PLACEHOLDER_OPS}
  unknown = sorted(set(input_shapes) - set(placeholders))
  if unknown:
    raise GraphImportError(
        f"{name}: input shapes given for {unknown}, which are not "
        f"placeholders of the graph ({sorted(placeholders) or 'none'})")
  for node in placeholders.values():
    shape = _shape_for(node, batch_size, input_shapes.get(node.name), name)
    if shape is not None:
      node.attr["shape"].shape.Clear()
      for d in shape:
        node.attr["shape"].shape.dim.add().size = int(d)
  return out


def parse_input_shapes(entries: Sequence[str]) -> Dict[str, Tuple[int, ...]]:
  """["images=32x28x28x1", "step="] -> {"images": (32, 28, 28, 1),
  "step": ()}."""
  out = {}
  for entry in entries:
    name, sep, dims = entry.partition("=")
    try:
      shape = tuple(int(d) for d in dims.split("x")) if dims else ()
    except ValueError:
      shape = None
    if not sep or not name or shape is None or any(d < 0 for d in shape):
      raise GraphImportError(f"--input_shapes entry {entry!r} is not "
                             "NAME=D0xD1x... (e.g. images=32x28x28x1)")
    out[name] = shape
  return out


def _shape_for(node, batch_size: Optional[int],
               given: Optional[Sequence[int]], name: str
               ) -> Optional[Tuple[int, ...]]:
  """The full shape to write into a placeholder, or None to leave it."""
  declared = declared_shape(node)
  if given is not None:
    given = tuple(int(d) for d in given)
    if any(d < 0 for d in given) or not fits(declared, given):
      raise GraphImportError(
          f"{name}: input shape {list(given)} given for {node.name!r} does "
          f"not fit its declared shape {shape_text(declared)}")
    return given
  if batch_size is None or not declared or declared[0] is not None:
    return None
  return (int(batch_size),) + tuple(-1 if d is None else d
                                    for d in declared[1:])


def shape_text(dims: Dims) -> str:
  """"[?, 784]" for (None, 784); "<unknown rank>" for None."""
  if dims is None:
    return "<unknown rank>"
  return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"
