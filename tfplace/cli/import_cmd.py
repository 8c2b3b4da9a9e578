"""import a model or graph file and write it as a graph file.

  tfplace import GRAPH_FILE --out FILE [--json] [--loop_trip_counts L=N,...]
                 [--batch_size N] [--input_shapes name=DxD,...]
  tfplace import --model NAME --out FILE [--json]

FILE is a MetaGraphDef (keeping the train_op, losses and init_op collections)
when it ends with .meta or .meta.pbtxt, else a GraphDef; text when it ends
with .pbtxt. Prints the graph's summary. Trip counts given with
--loop_trip_counts are recorded in FILE's loops, and shapes given with
--batch_size / --input_shapes in its placeholders, so later verbs need not
repeat them.
"""

import json
import os
from typing import Optional

from absl import flags

from tfplace.cli import input_flags
from tfplace.cli.run_helpers import LOOP_TRIP_COUNTS_HELP
from tfplace.errors import GraphImportError, TfplaceError
from tfplace.graph import graph_io
from tfplace.graph.op_graph import OpGraph
from tfplace.io_utils import check_out_path

_MODEL = flags.DEFINE_string("model", None, "a benchmark model name "
                             "(tfplace.models.registry)", allow_override=True)
_OUT = flags.DEFINE_string("out", None, "graph file to write",
                           allow_override=True)
_JSON = flags.DEFINE_bool("json", False, "print the summary as JSON",
                          allow_override=True)
flags.adopt_module_key_flags(input_flags)
_LOOP_TRIP_COUNTS = flags.DEFINE_string(
    "loop_trip_counts", None, LOOP_TRIP_COUNTS_HELP + "; recorded in FILE",
    allow_override=True)


def load(source: Optional[str], model: Optional[str],
         loop_trip_counts: Optional[str] = None, **sizes) -> OpGraph:
  """The OpGraph of a graph file or a benchmark model name (`sizes`: the
  importer's batch_size and input_shapes, for a graph file)."""
  if (source is None) == (model is None):
    raise GraphImportError("give exactly one of a graph file or --model NAME")
  if model is not None:
    if sizes.get("batch_size") is not None or sizes.get("input_shapes"):
      raise GraphImportError("--batch_size/--input_shapes size a graph "
                             "file's placeholders, not a benchmark model")
    from tfplace.models import registry
    try:
      return registry.build_model(model)
    except KeyError:
      raise GraphImportError(f"unknown model {model!r}") from None
  from tfplace.cli.run_helpers import parse_loop_trip_counts
  from tfplace.graph.importers import import_graph
  return import_graph(source, loop_trip_counts=parse_loop_trip_counts(
      loop_trip_counts), **sizes)


def is_meta_path(path: str) -> bool:
  return path.endswith(".meta") or path.endswith(".meta.pbtxt")


def write(graph: OpGraph, out: str) -> None:
  """Writes the graph (MetaGraphDef or GraphDef by extension), atomically."""
  if is_meta_path(out):
    proto = graph_io.meta_graph_def_for(graph.graph_def, graph.fetches)
  else:
    proto = graph.graph_def
  graph_io.write_graph_file(out, proto)


def run(source: Optional[str], model: Optional[str], out: str,
        loop_trip_counts: Optional[str] = None, **sizes) -> dict:
  """Imports and writes; returns the summary (`sizes`: see `load`)."""
  check_out_path(out)
  graph = load(source, model, loop_trip_counts, **sizes)
  write(graph, out)
  summary = graph.summary()
  summary["out"] = os.path.abspath(out)
  return summary


def main(argv) -> None:
  if len(argv) > 2:
    raise TfplaceError(f"expected one graph file, got {argv[1:]}")
  summary = run(argv[1] if len(argv) == 2 else None, _MODEL.value, _OUT.value,
                _LOOP_TRIP_COUNTS.value, **input_flags.import_kwargs())
  if _JSON.value:
    print(json.dumps(summary))
  else:
    print(f"{summary['name']}: {summary['num_ops']} ops, "
          f"{summary['num_edges']} edges, {summary['num_colocation_groups']} "
          f"colocation groups -> {summary['out']}")
