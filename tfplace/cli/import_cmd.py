"""import a model or graph file and write it as a graph file.

  tfplace import GRAPH_FILE --out FILE [--json] [--loop_trip_counts L=N,...]
                 [--batch_size N] [--input_shapes name=DxD,...]
                 [--loss TENSOR]
  tfplace import MODEL.keras [--loss LOSS] [--optimizer NAME]
                 [--batch_size 32] --out FILE [--json]
  tfplace import --model NAME --out FILE [--json]

A saved Keras model (a .keras, .h5 or .hdf5 file, or a SavedModel folder
that tf_keras saved) becomes its training step, fed seeded random data of
--batch_size rows (`tfplace.import_graph`), with the loss and optimizer it
was compiled with, or --loss (a Keras loss name, for every output; needed
when it was saved uncompiled) and --optimizer (a Keras optimizer name;
default the compiled one, else sgd); a model with custom layers cannot be
loaded here: import it in Python. FILE is a
MetaGraphDef (keeping the train_op, losses and init_op collections)
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
from tfplace.graph.keras_files import is_saved_keras_path
from tfplace.graph.op_graph import OpGraph
from tfplace.io_utils import check_out_path

_MODEL = flags.DEFINE_string("model", None, "a benchmark model name "
                             "(tfplace.models.registry)", allow_override=True)
_OUT = flags.DEFINE_string("out", None, "graph file to write",
                           allow_override=True)
_JSON = flags.DEFINE_bool("json", False, "print the summary as JSON",
                          allow_override=True)
flags.adopt_module_key_flags(input_flags)
_LOSS = flags.DEFINE_string("loss", None, "a saved Keras model: its loss "
                            "(a Keras loss name; default: the compiled "
                            "one); a graph file: its loss tensor (detected "
                            "when not given)", allow_override=True)
_OPTIMIZER = flags.DEFINE_string("optimizer", None, "a saved Keras model: "
                                 "its optimizer (a Keras optimizer name; "
                                 "default: the compiled one, else sgd)",
                                 allow_override=True)
_LOOP_TRIP_COUNTS = flags.DEFINE_string(
    "loop_trip_counts", None, LOOP_TRIP_COUNTS_HELP + "; recorded in FILE",
    allow_override=True)


def load(source: Optional[str], model: Optional[str],
         loop_trip_counts: Optional[str] = None, loss: Optional[str] = None,
         optimizer: Optional[str] = None, **sizes) -> OpGraph:
  """The OpGraph of a graph file, a saved Keras model (`loss`, `optimizer`:
  Keras names) or a benchmark model name (`sizes`: the importer's
  batch_size and input_shapes, for a file; `loss` for a graph file: its
  loss tensor)."""
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
  trip_counts = parse_loop_trip_counts(loop_trip_counts)
  if is_saved_keras_path(source):
    if sizes.get("input_shapes"):
      raise GraphImportError("--input_shapes sizes a graph file's "
                             "placeholders; a Keras model takes --batch_size")
    return import_graph(source, loss=loss or None, optimizer=optimizer,
                        batch_size=sizes.get("batch_size"),
                        loop_trip_counts=trip_counts)
  if optimizer is not None:
    raise GraphImportError("--optimizer is for a saved Keras model; a graph "
                           "file has its training ops already")
  return import_graph(source, loss=loss, loop_trip_counts=trip_counts,
                      **sizes)


def run(source: Optional[str], model: Optional[str], out: str,
        loop_trip_counts: Optional[str] = None, loss: Optional[str] = None,
        optimizer: Optional[str] = None, **sizes) -> dict:
  """Imports and writes; returns the summary (the arguments: see `load`)."""
  check_out_path(out, inputs=[source])
  graph = load(source, model, loop_trip_counts, loss, optimizer, **sizes)
  graph.save(out)
  summary = graph.summary()
  summary["out"] = os.path.abspath(out)
  return summary


def main(argv) -> None:
  if len(argv) > 2:
    raise TfplaceError(f"expected one graph file, got {argv[1:]}")
  summary = run(argv[1] if len(argv) == 2 else None, _MODEL.value, _OUT.value,
                _LOOP_TRIP_COUNTS.value, _LOSS.value, _OPTIMIZER.value,
                **input_flags.import_kwargs())
  if _JSON.value:
    print(json.dumps(summary))
  else:
    print(f"{summary['name']}: {summary['num_ops']} ops, "
          f"{summary['num_edges']} edges, {summary['num_colocation_groups']} "
          f"colocation groups -> {summary['out']}")
