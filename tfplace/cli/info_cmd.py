"""show ops, edges, colocation groups, parameter bytes, FLOPs and op types.

  tfplace info GRAPH_FILE [--json] [--loop_trip_counts LOOP=N,...]
               [--batch_size N] [--input_shapes name=DxD,...]

--json prints the summary with "colocation_groups": a list of lists of op
names (every group, singletons included).
"""

import json
from typing import Optional

from absl import flags

from tfplace.cli import input_flags
from tfplace.cli.run_helpers import LOOP_TRIP_COUNTS_HELP
from tfplace.errors import TfplaceError

_JSON = flags.DEFINE_bool("json", False, "print one JSON object",
                          allow_override=True)
flags.adopt_module_key_flags(input_flags)
_LOOP_TRIP_COUNTS = flags.DEFINE_string(
    "loop_trip_counts", None, LOOP_TRIP_COUNTS_HELP, allow_override=True)


def info(path: str, loop_trip_counts: Optional[str] = None,
         **sizes) -> dict:
  """The summary of a graph file, with colocation groups by op name
  (`sizes`: the importer's batch_size and input_shapes)."""
  from tfplace.cli.run_helpers import parse_loop_trip_counts
  from tfplace.graph.importers import import_graph
  graph = import_graph(path, loop_trip_counts=parse_loop_trip_counts(
      loop_trip_counts), **sizes)
  summary = graph.summary()
  summary["colocation_groups"] = [[graph.ops[i].name for i in group]
                                  for group in graph.colocation_groups]
  return summary


def main(argv) -> None:
  if len(argv) != 2:
    raise TfplaceError("usage: tfplace info GRAPH_FILE [--json]")
  summary = info(argv[1], _LOOP_TRIP_COUNTS.value,
                 **input_flags.import_kwargs())
  if _JSON.value:
    print(json.dumps(summary))
    return
  for key in ("name", "num_ops", "num_edges", "num_control_edges",
              "num_colocation_groups", "num_multi_op_groups", "largest_group",
              "param_bytes", "activation_bytes", "flops",
              "num_control_flow_ops", "train_ops", "loss"):
    print(f"{key:<22} {summary[key]}")
  for name, loop in summary["loops"].items():
    print(f"loop {name}: {loop['trip_count']} trips ({loop['source']}), "
          f"{loop['flops']:.4g} FLOPs")
  print("op types:")
  for op_type, count in summary["op_types"].items():
    print(f"  {op_type:<30} {count}")
