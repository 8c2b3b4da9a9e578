"""write a placed graph: every NodeDef.device set from a placement.

  tfplace apply GRAPH_FILE PLACEMENT.json --out placed.pbtxt [--cluster C]

Validates the placement first (against the cluster when --cluster names a
preset or a cluster JSON file; else device strings are checked for form and
kernels). The output has the input's form (GraphDef or MetaGraphDef).
"""

import json

from absl import flags

from tfplace.cli.run_helpers import CLUSTER_HELP
from tfplace.errors import TfplaceError
from tfplace.io_utils import check_out_path

_OUT = flags.DEFINE_string("out", None, "placed graph file to write",
                           allow_override=True)
_CLUSTER = flags.DEFINE_string("cluster", None, CLUSTER_HELP,
                               allow_override=True)
_JSON = flags.DEFINE_bool("json", False, "print the result as JSON",
                          allow_override=True)


def apply(graph_path: str, placement_path: str, out: str,
          cluster_name=None) -> dict:
  """Validates and writes the placed graph; returns a small report."""
  from tfplace.graph import graph_io, importers
  from tfplace.placement import Placement, placed_graph_def
  check_out_path(out, inputs=[graph_path, placement_path])
  graph_def, meta = graph_io.read_graph_file(graph_path)
  name = graph_path.rsplit("/", 1)[-1].split(".")[0]
  graph = (importers.from_meta_graph(meta, name=name) if meta is not None
           else importers.from_graph_def(graph_def, name=name))
  placement = Placement.load(placement_path)
  cluster = None
  if cluster_name:
    from tfplace.cli.cluster_arg import load_cluster_arg
    cluster = load_cluster_arg(cluster_name)
  placed = placed_graph_def(graph, placement, cluster)
  if meta is not None:
    proto = type(meta)()
    proto.CopyFrom(meta)
    proto.graph_def.CopyFrom(placed)
  else:
    proto = placed
  graph_io.write_graph_file(out, proto)
  return {"out": out, "num_ops": graph.num_ops,
          "devices": placement.device_counts()}


def main(argv) -> None:
  if len(argv) != 3:
    raise TfplaceError("usage: tfplace apply GRAPH_FILE PLACEMENT.json "
                       "--out FILE [--cluster C]")
  report = apply(argv[1], argv[2], _OUT.value, _CLUSTER.value)
  if _JSON.value:
    print(json.dumps(report))
    return
  print(f"placed {report['num_ops']} ops -> {report['out']}")
  for device, count in sorted(report["devices"].items()):
    print(f"  {device}: {count} ops")
