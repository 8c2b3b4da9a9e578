"""The tensors TensorFlow sends between devices in one step of a placement.

TF partitions a placed graph per device and joins the parts with
`_Send`/`_Recv` pairs (`_HostSend`/`_HostRecv` for host-memory tensors):
one per tensor and remote device that reads it, one per control edge to
another device, after its runtime's own rewrites (small constants copied
to every CPU that reads them, loops lowered and their unread accumulators
pruned). `sent_messages` reads them from one step's partition graphs
(`RunOptions.output_partition_graphs`); `scripts/message_count.py` puts
them beside the simulator's transfers.
"""

import dataclasses
from typing import Optional, Tuple

from tfplace.cost.cluster import Cluster
from tfplace.graph.op_graph import OpGraph
from tfplace.measurement.config import MeasureConfig
from tfplace.measurement.feeds import resolve_inputs
from tfplace.measurement.graph_inputs import step_fetches
from tfplace.measurement.runner import check_served, check_target
from tfplace.measurement.session import Deadline, StepSession
from tfplace.placement import Placement, placed_graph_def

SEND_OPS = ("_Send", "_HostSend")


@dataclasses.dataclass(frozen=True)
class Message:
  """One tensor sent between two devices.

  Attributes:
    tensor: the sent tensor as its `_Send` reads it ("op" or "op:1"; a
      control edge's is a dummy constant named "<op>/ctrl_S<n>").
    src: the sending device.
    dst: the receiving device.
  """
  tensor: str
  src: str
  dst: str


def sent_messages(run_metadata) -> Tuple[Message, ...]:
  """The device-to-device sends of one step's partition graphs (fed and
  fetched values, which go to or from the client, left out)."""
  messages = []
  for part in run_metadata.partition_graphs:
    for node in part.node:
      if node.op not in SEND_OPS or node.attr["client_terminated"].b:
        continue
      messages.append(Message(node.input[0],
                              node.attr["send_device"].s.decode(),
                              node.attr["recv_device"].s.decode()))
  return tuple(messages)


def step_messages(graph: OpGraph, placement: Placement,
                  config: Optional[MeasureConfig] = None, *,
                  cluster: Optional[Cluster] = None,
                  feeds=None) -> Tuple[Message, ...]:
  """Runs one training step of `graph` placed by `placement` (after its
  init ops) and returns what TF sent between devices (on a server cluster
  also the fetched loss, from its worker to task 0's CPU, where the
  client reads it).

  Args:
    graph: the training step.
    placement: op -> device.
    config: the target (default: in process).
    cluster: optional cluster the placement must fit (only validated).
    feeds: as `measure`'s.

  Raises:
    MeasureError, FeedError: as `measure`.
  """
  config = config or MeasureConfig()
  fetches = step_fetches(graph)
  cpus = check_target(placement, config)
  check_served(config)
  with StepSession(placed_graph_def(graph, placement, cluster), fetches,
                   config=config, num_cpu_devices=cpus,
                   deadline=Deadline(config),
                   inputs=resolve_inputs(graph, feeds, None,
                                         fetches)) as session:
    session.initialize()
    return sent_messages(session.step(partition_graphs=True).run_metadata)
