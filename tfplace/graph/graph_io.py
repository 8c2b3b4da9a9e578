"""Graph files: GraphDef or MetaGraphDef, binary (.pb/.meta) or text (.pbtxt).

The kind of proto and its encoding are detected from the content; the file
extension only decides which to try first.
"""

import os
import re
from typing import Optional, Tuple

from tfplace.errors import GraphImportError
from tfplace.io_utils import atomic_write

_NAME_RE = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\-/>]*$")
_OP_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.>\-]*$")


def _protos():
  from tensorflow.core.framework import graph_pb2  # Lazy: heavy import.
  from tensorflow.core.protobuf import meta_graph_pb2
  return graph_pb2.GraphDef, meta_graph_pb2.MetaGraphDef


def _plausible(graph_def) -> bool:
  """True if every node has a valid name and op type (not parsed garbage)."""
  return all(_NAME_RE.match(n.name) and _OP_RE.match(n.op)
             for n in graph_def.node)


def _parse_text(text: str, meta_first: bool):
  from google.protobuf import text_format
  graph_def_cls, meta_cls = _protos()
  order = (meta_cls, graph_def_cls) if meta_first else (graph_def_cls, meta_cls)
  for cls in order:
    proto = cls()
    try:
      text_format.Parse(text, proto)
    except text_format.ParseError:
      continue
    return proto
  return None


def _parse_binary(data: bytes, meta_first: bool):
  from google.protobuf.message import DecodeError
  graph_def_cls, meta_cls = _protos()
  order = (meta_cls, graph_def_cls) if meta_first else (graph_def_cls, meta_cls)
  for cls in order:
    proto = cls()
    try:
      proto.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError):
      continue
    graph_def = proto.graph_def if cls is meta_cls else proto
    if cls is meta_cls and not proto.HasField("graph_def"):
      continue
    if graph_def.node and _plausible(graph_def):
      return proto
  return None


def read_graph_file(path: str) -> Tuple[object, Optional[object]]:
  """Reads a graph file.

  Args:
    path: a .pb, .pbtxt, .meta (or .meta.pbtxt) file holding a GraphDef or a
      MetaGraphDef, binary or text.

  Returns:
    (graph_def, meta_graph_def or None).

  Raises:
    GraphImportError: the file is missing, unreadable, not a TensorFlow graph
      or an empty graph.
  """
  if not os.path.isfile(path):
    raise GraphImportError(f"no such graph file: {path}")
  with open(path, "rb") as f:
    data = f.read()
  if not data.strip():
    raise GraphImportError(f"{path} is empty; expected a GraphDef or "
                           "MetaGraphDef (.pb, .pbtxt or .meta)")
  meta_first = ".meta" in os.path.basename(path)
  proto = None
  try:
    text = data.decode("utf-8")
  except UnicodeDecodeError:
    text = None
  if text is not None:
    proto = _parse_text(text, meta_first)
  if proto is None:
    proto = _parse_binary(data, meta_first)
  if proto is None:
    raise GraphImportError(
        f"{path} is not a TensorFlow graph: it parses as neither a GraphDef "
        "nor a MetaGraphDef, binary or text (corrupt or another format?)")
  _, meta_cls = _protos()
  if isinstance(proto, meta_cls):
    graph_def, meta = proto.graph_def, proto
  else:
    graph_def, meta = proto, None
  if not graph_def.node:
    raise GraphImportError(f"{path}: the graph is empty (no ops)")
  return graph_def, meta


def write_graph_file(path: str, proto) -> None:
  """Writes a GraphDef or MetaGraphDef atomically.

  Text format if `path` ends with .pbtxt, else binary.
  """
  if path.endswith(".pbtxt"):
    from google.protobuf import text_format
    atomic_write(path, text_format.MessageToString(proto))
  else:
    atomic_write(path, proto.SerializeToString())


def is_meta_path(path: str) -> bool:
  """Whether `path` names a MetaGraphDef file (.meta or .meta.pbtxt)."""
  return path.endswith(".meta") or path.endswith(".meta.pbtxt")


def write_op_graph(graph, path: str) -> None:
  """Writes an OpGraph's GraphDef, or a MetaGraphDef with its step's
  collections when `path` names one (`is_meta_path`), atomically."""
  if is_meta_path(path):
    write_graph_file(path, meta_graph_def_for(graph.graph_def, graph.fetches))
  else:
    write_graph_file(path, graph.graph_def)


def meta_graph_def_for(graph_def, fetches):
  """A MetaGraphDef holding `graph_def` and the step's collections.

  Collections (as TF1's export_meta_graph writes them): "train_op" (op
  names), "losses" (tensor names), "init_op" (op names).

  Args:
    graph_def: a GraphDef.
    fetches: a `StepFetches`.
  """
  _, meta_cls = _protos()
  meta = meta_cls()
  meta.graph_def.CopyFrom(graph_def)
  meta.meta_info_def.meta_graph_version = "tfplace"
  for key, names in (("train_op", fetches.train_ops),
                     ("losses", [fetches.loss] if fetches.loss else []),
                     ("init_op", fetches.init_ops)):
    if names:
      meta.collection_def[key].node_list.value.extend(names)
  return meta
