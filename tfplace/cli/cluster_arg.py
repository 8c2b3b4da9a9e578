"""The --cluster argument of the CLI verbs, in every form a user has.

A preset name (`tfplace clusters`), a cluster JSON file, the state file that
`tfplace cluster up` writes, or a TF cluster spec (`{"worker": [...]}`, a file
or inline JSON) of servers started elsewhere: the last two describe the
servers' workers (`/job:worker/replica:0/task:i/device:CPU:0`, and the GPUs
a state file says they were given) as a cluster, with the figures `tfplace
cluster up` (or `tfplace cluster benchmark`) measured when the state file
holds them. A plain spec is read without asking its servers, so it
describes CPUs only: for servers with GPUs, `tfplace cluster benchmark
--cluster_spec ... --out cluster.json` asks them and writes the measured
cluster to pass instead.
"""

import dataclasses
import json
import os
from typing import Dict, List, Optional, Tuple

from tfplace.cost.cluster import Cluster
from tfplace.cost.presets import load_cluster


@dataclasses.dataclass(frozen=True)
class ServerSpec:
  """TF servers to run on: from a `tfplace cluster up` state or a spec."""
  cluster_spec: Dict[str, List[str]]
  cores_per_worker: int = 1
  profiler_addresses: Optional[List[str]] = None
  measured_cluster: Optional[dict] = None
  gpus_per_worker: Tuple[int, ...] = ()
  gpu_memory_bytes: Optional[float] = None

  def remote(self):
    from tfplace.measurement.local_cluster import RemoteCluster
    return RemoteCluster.from_json(json.dumps(self.cluster_spec),
                                   self.cores_per_worker,
                                   self.gpus_per_worker,
                                   self.gpu_memory_bytes)


def read_server_spec(value: str) -> Optional[ServerSpec]:
  """The servers `value` (a file path or inline JSON) names, or None."""
  text = value
  if os.path.isfile(value):
    try:
      with open(value) as f:
        text = f.read()
    except OSError:
      return None
  try:
    data = json.loads(text)
  except ValueError:
    return None
  if not isinstance(data, dict):
    return None
  if "cluster_spec" in data:  # `tfplace cluster up` state.
    return ServerSpec(data["cluster_spec"],
                      int(data.get("cores_per_worker", 1)),
                      data.get("profiler_addresses"), data.get("cluster"),
                      tuple(data.get("gpus_per_worker", ())),
                      data.get("gpu_memory_bytes"))
  if "worker" in data and "devices" not in data:
    return ServerSpec(data)
  return None


def load_cluster_arg(value: str) -> Cluster:
  """The cluster `value` names; raises ClusterError (or MeasureError)."""
  spec = read_server_spec(value)
  if spec is None:
    return load_cluster(value)
  if spec.measured_cluster is not None:
    return Cluster.from_dict(spec.measured_cluster, name=value)
  return spec.remote().to_cluster()
