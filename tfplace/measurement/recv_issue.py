"""What it costs a one-core TF server worker to start one Recv.

A worker's part of a step starts every `_Recv` it has before its ops run:
each one starts a RecvTensor call to the sender, on the worker's compute
thread (the profiler's `ExecutorState::ProcessAsync::Start` events). Step
times cannot separate that cost from the rest of a message's, so it is
read off a profiled step: every worker sends `messages` scalars to the
next one (a ring: each worker also issues `messages` Recvs), measured with
`runner.measure(..., trace_dir=)` (the workers' profiler servers), and the
median issue event of each worker over `repeats` profiled steps is its
cost (`tfplace.trace.host_activity`). On this project's two one-core
workers: 12-29 us per step, 14.6 us over three steps (2026-11-26).

The simulator charges it at the step start (`Device.recv_issue_s`,
`tfplace.simulator.kernel`); the cluster benchmark's per-message cost and
ping-pong hop already hold it, so it is taken off the receiving end's
per-message cost there.
"""

import tempfile
from typing import Dict, List, Sequence

import numpy as np
from absl import logging

from tfplace.cost.cluster import Cluster
from tfplace.errors import MeasureError, TraceError
from tfplace.measurement.config import MeasureConfig

MESSAGES = 64
REPEATS = 3


def ring_graph(devices: Sequence[str], messages: int = MESSAGES):
  """The OpGraph and Placement of the ring (see the module docstring)."""
  import tensorflow as tf
  from tfplace.graph.importers import from_tf_graph
  from tfplace.measurement.message_cost import build_case
  from tfplace.placement import Placement
  if len(devices) < 2 or messages < 1:
    raise MeasureError("the Recv issue cost needs two devices or more and "
                       "at least one message")
  graph, fetches = tf.Graph(), []
  with graph.as_default():
    for i, sender in enumerate(devices):
      with tf.name_scope(f"ring_{i}"):
        fetches += build_case("idle", messages, sender,
                              devices[(i + 1) % len(devices)], messages)
  op_graph = from_tf_graph(graph, [t.op.name for t in fetches], None,
                           name="recv_issue_ring")
  return op_graph, Placement({op.name: op.requested_device
                              for op in op_graph.ops})


def _task(device: str) -> str:
  return device.split("/device:")[0]


def measure_recv_issue(cluster: Cluster, config: MeasureConfig,
                       messages: int = MESSAGES, repeats: int = REPEATS
                       ) -> Dict[str, float]:
  """Device name -> median seconds to start one Recv, for the devices of
  `cluster` whose profile had issue events (none when the workers cannot
  be profiled: the caller keeps no issue phase, with a warning).

  Raises:
    MeasureError: fewer than two devices, or a step failed.
  """
  from tfplace.measurement.runner import measure
  from tfplace.trace.host_activity import host_activity
  from tfplace.trace.reader import xplane_files
  graph, placement = ring_graph(cluster.device_names, messages)
  samples: Dict[str, List[float]] = {d: [] for d in cluster.device_names}
  by_task = {_task(d): d for d in cluster.device_names}
  for _ in range(repeats):
    with tempfile.TemporaryDirectory(prefix="tfplace_recv_issue_") as out:
      measure(graph, placement, config, cluster=cluster, trace_dir=out)
      try:
        activity = host_activity(xplane_files(out))
      except TraceError as e:
        logging.warning("Recv issue cost not measured: no profile of the "
                        "workers (%s)", e)
        return {}
    for t in activity.threads:
      device = by_task.get(t.worker)
      if device is not None and "recv_issue" in t.counts:
        samples[device].append(t.median_s["recv_issue"])
  return {d: float(np.median(v)) for d, v in samples.items() if v}


def with_recv_issue(bench, cluster: Cluster, config: MeasureConfig):
  """`bench` (a `ClusterBenchmark`) with each device's measured Recv issue
  cost, on a cluster with rendezvous transfers (elsewhere, or when the
  workers cannot be profiled, `bench` as it is)."""
  import dataclasses
  if not cluster.rendezvous_transfers:
    return bench
  issue = measure_recv_issue(cluster, config)
  return dataclasses.replace(bench, devices=tuple(
      dataclasses.replace(d, recv_issue_s=issue.get(d.device, 0.0))
      for d in bench.devices))
