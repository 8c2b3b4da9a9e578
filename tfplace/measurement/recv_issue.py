"""What it costs a one-core TF server worker to start one Recv.

A worker's part of a step starts every `_Recv` it has before its ops run:
each one starts a RecvTensor call to the sender, on the worker's compute
thread (the profiler's `ExecutorState::ProcessAsync::Start` events). Step
times cannot separate that cost from the rest of a message's, so it is
read off a profiled step: every worker sends `messages` scalars to the
next one (a ring: each worker also issues `messages` Recvs), measured with
`runner.measure(..., trace_dir=)` (the workers' profiler servers), and the
median issue event of each worker over `repeats` profiled steps is its
cost (the events `tfplace trace --threads` counts as Recv issues). On
this project's two one-core workers: 13.5-26.7 us per worker in the
calibrations of records r25-r28 (2026-11-26).

The simulator charges it at the step start (`Device.recv_issue_s`,
`tfplace.simulator.kernel`); the cluster benchmark's per-message cost and
ping-pong hop already hold it, so it is taken off the receiving end's
per-message cost there.
"""

import glob
import json
import os
import tempfile
from typing import Dict, List, Sequence

import numpy as np
from absl import logging

from tfplace.cost.cluster import Cluster
from tfplace.errors import MeasureError
from tfplace.measurement.config import MeasureConfig

MESSAGES = 64
REPEATS = 3
# The profiler's event for an async kernel (a `_Recv`) starting.
ISSUE_EVENT = "ExecutorState::ProcessAsync::Start"


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


def issue_durations(trace_dir: str) -> Dict[str, List[float]]:
  """TF task -> seconds of each of its Recv issue events in the profile
  that `runner.measure` wrote under `trace_dir` (its run's tasks.json
  names each file's task); {} without one. `tfplace trace --threads`
  shows the same events with the rest of each thread's time."""
  from tensorflow.tsl.profiler.protobuf import xplane_pb2
  from tfplace.measurement.remote_profile import TASKS_FILE, TASKS_FORMAT
  runs = sorted(glob.glob(os.path.join(trace_dir, "plugins", "profile", "*")))
  if not runs:
    return {}
  try:
    with open(os.path.join(runs[-1], TASKS_FILE)) as f:
      doc = json.load(f)
    tasks = dict(doc["tasks"]) if doc.get("format") == TASKS_FORMAT else {}
  except (OSError, ValueError, KeyError, TypeError, AttributeError):
    return {}
  out: Dict[str, List[float]] = {}
  for host, task in tasks.items():
    path = os.path.join(runs[-1], f"{host}.xplane.pb")
    if not os.path.isfile(path):
      continue
    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
      space.ParseFromString(f.read())
    for plane in space.planes:
      issue = {k for k, m in plane.event_metadata.items()
               if m.name.startswith(ISSUE_EVENT)}
      out.setdefault(str(task), []).extend(
          e.duration_ps / 1e12 for line in plane.lines for e in line.events
          if e.metadata_id in issue)
  return out


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
  graph, placement = ring_graph(cluster.device_names, messages)
  samples: Dict[str, List[float]] = {d: [] for d in cluster.device_names}
  by_task = {_task(d): d for d in cluster.device_names}
  for _ in range(repeats):
    with tempfile.TemporaryDirectory(prefix="tfplace_recv_issue_") as out:
      measure(graph, placement, config, cluster=cluster, trace_dir=out)
      found = issue_durations(out)
    if not found:
      logging.warning("Recv issue cost not measured: no profile of the "
                      "workers")
      return {}
    for task, durations in found.items():
      if by_task.get(task) is not None and durations:
        samples[by_task[task]].append(float(np.median(durations)))
  return {d: float(np.median(v)) for d, v in samples.items() if v}


def with_recv_issue(bench, cluster: Cluster, config: MeasureConfig):
  """`bench` (a `ClusterBenchmark`) with each device's measured Recv issue
  cost, on a cluster with rendezvous transfers (elsewhere, or when the
  workers cannot be profiled or the ring's step fails, `bench` as it is,
  with a warning: the calibration it completes is kept)."""
  import dataclasses
  if not cluster.rendezvous_transfers:
    return bench
  try:
    issue = measure_recv_issue(cluster, config)
  except MeasureError as e:
    logging.warning("Recv issue cost not measured: %s", e)
    return bench
  return dataclasses.replace(bench, devices=tuple(
      dataclasses.replace(d, recv_issue_s=issue.get(d.device, 0.0))
      for d in bench.devices))
