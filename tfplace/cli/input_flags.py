"""The flags that size a graph's inputs, shared by every verb that reads a
graph (import, info, place, simulate, measure, calibrate).

`--batch_size N` and `--input_shapes name=DxD,...` are written into the
graph's placeholders before it is read (`tfplace.graph.input_shapes`), so
costs, predictions and the placed GraphDef are those of the batch the user
trains with, and the real-run verbs synthesize inputs of that shape. Defined
once here (absl rejects a second definition of a flag name) and adopted as
key flags by each verb (`flags.adopt_module_key_flags(input_flags)`), so `tfplace VERB --help` lists them.
"""

from typing import Dict

from absl import flags

_BATCH_SIZE = flags.DEFINE_integer(
    "batch_size", None, "size of the unknown first (batch) dimension of the "
    "graph's placeholders; costs and the placed graph are at this batch")
_INPUT_SHAPES = flags.DEFINE_list(
    "input_shapes", [], "full shapes of placeholders with unknown "
    "dimensions, e.g. images=32x28x28x1,labels=32 (overrides --batch_size)")


def input_shapes() -> Dict[str, tuple]:
  """{placeholder: shape} from --input_shapes (GraphImportError if bad)."""
  from tfplace.graph.input_shapes import parse_input_shapes
  return parse_input_shapes(_INPUT_SHAPES.value)


def import_kwargs() -> dict:
  """The importer's `batch_size` and `input_shapes` the flags give."""
  return dict(batch_size=_BATCH_SIZE.value, input_shapes=input_shapes())
