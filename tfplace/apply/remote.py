"""Eager TF2 connected to a cluster of TF servers, so their devices are real.

`connect(cluster)` calls `tf.config.experimental_connect_to_cluster` with the
cluster's spec: this process joins as job "localhost" and the servers'
devices (`/job:worker/replica:0/task:N/device:CPU:0`, GPUs likewise) become
devices that eager ops, variables and `tf.function`s can be placed on. A
placement for the cluster (`tfplace.place(graph, servers.to_cluster())`) is
then applied as on local devices: `tfplace.apply(step_or_model, placement)`.

    with tfplace.LocalCluster(num_workers=2) as servers:
      tfplace.apply.connect(servers)
      placed = tfplace.apply(model, placement, args=(x, y))
      placed.fit(x, y)

Ops the placement does not name run on this process's CPU
(/job:localhost/replica:0/task:0/device:CPU:0), the input pipeline of
`fit` among them. Connecting again replaces the previous cluster; TF has no
way to disconnect, so stop the servers only when the process is done with
them (TF logs "Failed to register function remotely" otherwise).
"""

from typing import Dict, List, Mapping, Sequence, Union

from absl import logging

from tfplace.apply.device_function import runtime_devices
from tfplace.errors import ClusterError

ClusterLike = Union[Mapping[str, Sequence[str]], object]


def cluster_spec_of(cluster: ClusterLike) -> Dict[str, List[str]]:
  """{job: ["host:port", ...]} of a LocalCluster, RemoteCluster,
  tf.train.ClusterSpec or dict; raises ClusterError if malformed."""
  if hasattr(cluster, "as_dict"):
    spec = cluster.as_dict()
  elif hasattr(cluster, "cluster_spec"):
    spec = cluster.cluster_spec
  else:
    spec = cluster
  if not isinstance(spec, Mapping) or not spec:
    raise ClusterError(f"not a cluster spec: {spec!r}; expected e.g. "
                       '{"worker": ["host:2222", "host:2223"]}')
  out = {}
  for job, tasks in spec.items():
    tasks = list(tasks.values()) if isinstance(tasks, Mapping) else tasks
    if (not isinstance(job, str) or not isinstance(tasks, (list, tuple)) or
        not tasks or not all(isinstance(t, str) and ":" in t for t in tasks)):
      raise ClusterError(f"job {job!r} of the cluster spec must list "
                         f'"host:port" addresses, got {tasks!r}')
    out[job] = list(tasks)
  if "localhost" in out:
    raise ClusterError('the job name "localhost" is this process\'s own; '
                       "name the servers' job otherwise (e.g. worker)")
  return out


def connect(cluster: ClusterLike, timeout_s: float = 2.0) -> List[str]:
  """Connects eager TF to the servers of `cluster`.

  Args:
    cluster: a `LocalCluster` (started), a `RemoteCluster`, a
      `tf.train.ClusterSpec`, or a dict {job: ["host:port", ...]}.
    timeout_s: how long to try reaching each server first.

  Returns:
    The full names of the servers' devices, sorted.

  Raises:
    ClusterError: a malformed spec, a server not reachable, or a task whose
      devices TF does not list after connecting.
  """
  import tensorflow as tf
  from tfplace.measurement.local_cluster import reachable
  spec = cluster_spec_of(cluster)
  for job, tasks in spec.items():
    for task, address in enumerate(tasks):
      if not reachable(address, timeout_s):
        raise ClusterError(f"TF server {job}:{task} at {address} is not "
                           "reachable; start it first (tfplace cluster up, "
                           "or tf.distribute.Server on that host)")
  tf.config.experimental_connect_to_cluster(tf.train.ClusterSpec(spec))
  devices = sorted(d for d in runtime_devices()
                   if not d.startswith("/job:localhost/"))
  for job, tasks in spec.items():
    for task in range(len(tasks)):
      prefix = f"/job:{job}/replica:0/task:{task}/"
      if not any(d.startswith(prefix) for d in devices):
        raise ClusterError(f"connected, but TF lists no device of {job}:"
                           f"{task} ({tasks[task]})")
  logging.info("connected to %s: %s", spec, devices)
  return devices
