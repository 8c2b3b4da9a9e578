"""Whole-cluster memory check: can the model fit on the cluster at all?

A placement can only succeed when the cluster's memory, all devices together,
holds the model's persistent state (variables and optimizer slots) plus the
working set of its largest op (inputs and outputs live at once). Anything less
is rejected before placing, with a message that says by how much.
"""

from tfplace.cost.cluster import Cluster
from tfplace.errors import ClusterError
from tfplace.graph.op_graph import OpGraph
from tfplace.units import format_bytes


def memory_floor_bytes(graph: OpGraph) -> int:
  """Bytes any placement needs in total: parameters + the largest op's I/O."""
  working_set = graph.input_bytes + graph.output_bytes
  return int(graph.param_bytes.sum() + working_set.max())


def check_model_fits(graph: OpGraph, cluster: Cluster) -> None:
  """Raises ClusterError if the model is larger than all devices together."""
  need = memory_floor_bytes(graph)
  have = sum(d.memory_bytes for d in cluster.devices)
  if need > have:
    raise ClusterError(
        f"{graph.name} needs at least {format_bytes(need)} (parameters and optimizer "
        f"slots {format_bytes(graph.param_bytes.sum())} plus the largest op's "
        f"tensors), more than all {cluster.num_devices} devices of cluster "
        f"{cluster.name!r} hold together ({format_bytes(have)}); use a cluster with "
        "more memory or a smaller model")
