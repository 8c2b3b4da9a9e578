"""Where real runs happen: the target of a verification or a real search.

`resolve_target` accepts what a user has:

  * a `LocalCluster` or `RemoteCluster` (TF servers here or on other hosts;
    anything with `target`, `addresses` and `to_cluster()`), or the servers'
    cluster spec as a dict, `{"worker": ["host:port", ...]}`,
  * "grpc://host:port", one TF server (its devices are listed from it),
  * "" or "local": this process, on the devices the cluster names under
    `/job:localhost/replica:0/task:0`: CPU:i become logical CPUs of this
    one process (sharing its cores), GPU:i are this machine's GPUs. A
    cluster of TF servers' devices is refused with what to give instead.

`check_target` runs before any search: the servers answer, the cluster
placed on is the target's (the same device names), and a calibration in
use was made for it. `checked_problem` (what `verify_top_k` and
`place_on_target` run) also asks the servers of a cluster spec which task
each is. Each failure is one clear error; nothing is measured.
"""

import dataclasses
import json
from typing import Mapping, Optional, Tuple

from tfplace.cost import calibrated
from tfplace.cost.cluster import Cluster
from tfplace.errors import MeasureError, PlacementError
from tfplace.measurement.config import MeasureConfig
from tfplace.measurement.health import dead_tasks
from tfplace.measurement.local_cluster import (RemoteCluster,
                                               check_reachable,
                                               cluster_from_target,
                                               workers_for)
from tfplace.measurement.local_devices import local_cpus_for
from tfplace.measurement.server_tasks import check_served_tasks
from tfplace.placers.problem import PlacementProblem

LOCAL_PREFIX = "/job:localhost/replica:0/task:0/device:"


@dataclasses.dataclass(frozen=True)
class Target:
  """A place to run training steps.

  Attributes:
    session_target: "grpc://host:port", or "" for this process.
    workers: "host:port" of every worker (health-checked while steps run).
    device_names: the devices the target offers (empty in process: any
      number of logical CPUs).
    description: for messages, e.g. "2 TF servers at grpc://127.0.0.1:2222".
  """
  session_target: str
  workers: Tuple[str, ...] = ()
  device_names: Tuple[str, ...] = ()
  description: str = "this process"

  @property
  def remote(self) -> bool:
    return bool(self.session_target)

  def measure_config(self, base: Optional[MeasureConfig] = None
                     ) -> MeasureConfig:
    """`base` (default `MeasureConfig()`) aimed at this target."""
    return (base or MeasureConfig()).replace(target=self.session_target,
                                             workers=self.workers)

  def dead_workers(self) -> list:
    """The workers found dead now (`DeadTask`s; none in process)."""
    if not self.remote:
      return []
    _, processes = workers_for(self.session_target)
    return dead_tasks(list(self.workers), processes)


def resolve_target(target) -> Target:
  """The `Target` of a LocalCluster/RemoteCluster, "grpc://..." or "local".

  Raises:
    MeasureError: an unknown form, or a lone server that does not answer.
  """
  target = _servers_of_spec(target)
  if target is None or target in ("", "local"):
    return Target("", (), (), "this process")
  if isinstance(target, Target):
    return target
  if isinstance(target, str):
    if not target.startswith("grpc://"):
      raise MeasureError(f"a target is grpc://host:port, 'local', or a "
                         f"cluster of TF servers; got {target!r}")
    names = cluster_from_target(target).device_names
    return Target(target, (target[len("grpc://"):],), tuple(names),
                  f"the TF server {target}")
  if all(hasattr(target, a) for a in ("target", "addresses", "to_cluster")):
    addresses = tuple(target.addresses)
    return Target(target.target, addresses,
                  tuple(target.to_cluster().device_names),
                  f"{len(addresses)} TF server"
                  f"{'s' if len(addresses) != 1 else ''} at {target.target}")
  raise MeasureError(f"cannot run steps on {target!r}: pass a LocalCluster, "
                     "a RemoteCluster, a cluster spec {'worker': "
                     "['host:port', ...]}, 'grpc://host:port' or 'local'")


def _servers_of_spec(target):
  """A cluster spec dict as the `RemoteCluster` of its servers; any other
  target as it is (MeasureError for a dict that is not a spec)."""
  if not isinstance(target, Mapping):
    return target
  return RemoteCluster.from_json(json.dumps(dict(target)))


def check_target(target: Target, cluster: Cluster,
                 calibration: Optional["calibrated.Calibration"] = None
                 ) -> None:
  """Raises before any work if `target` cannot run placements of `cluster`.

  Raises:
    MeasureError: a server does not answer, or the cluster's devices are
      not the target's.
    ClusterError: the calibration was made for another cluster.
  """
  if target.remote:
    check_reachable(list(target.workers) or [target.session_target])
    dead = target.dead_workers()
    if dead:
      raise MeasureError(f"the target {target.description} has a dead "
                         f"worker: {dead[0]}")
  _check_devices(target, cluster)
  if calibration is not None:
    calibrated.check_calibration_matches(calibration, cluster)


def _check_devices(target: Target, cluster: Cluster) -> None:
  names = tuple(cluster.device_names)
  if not target.remote:
    _check_in_process(cluster)
    return
  if names != target.device_names:
    raise MeasureError(
        f"cluster {cluster.name!r} ({', '.join(names)}) is not the cluster "
        f"of the target, {target.description} "
        f"({', '.join(target.device_names)}): place on the target's own "
        "cluster (--cluster the same state file or cluster spec as --target)")


def _check_in_process(cluster: Cluster) -> None:
  """The target "local" runs steps in this process: the cluster must name
  its devices (MeasureError saying what to give instead)."""
  import tensorflow as tf
  local = ("the target 'local' runs the steps in this process, on its own "
           f"devices ({LOCAL_PREFIX}CPU:i and this machine's GPUs)")
  elsewhere = [n for n in cluster.device_names
               if tf.DeviceSpec.from_string(n).job not in (None, "localhost")
               or tf.DeviceSpec.from_string(n).task not in (None, 0)]
  if elsewhere:
    more = f" and {len(elsewhere) - 1} more" if len(elsewhere) > 1 else ""
    raise MeasureError(
        f"{local}, but cluster {cluster.name!r} names devices of TF servers "
        f"({elsewhere[0]}{more}): to measure on the servers, give them as "
        "the target too (the same state file or cluster spec as --cluster, "
        "or grpc://host:port); to measure here, place on the cluster "
        "'local'")
  try:
    local_cpus_for(cluster.device_names)
  except MeasureError as e:
    raise MeasureError(f"{local}, which cluster {cluster.name!r} does not "
                       f"fit: {e}") from None


def target_cluster(target) -> Cluster:
  """The cluster of a target object: a LocalCluster's (measured when it
  was benchmarked), or a lone server's listed devices.

  Raises:
    PlacementError: in process ("local"), where a cluster must be given.
  """
  target = _servers_of_spec(target)
  if hasattr(target, "to_cluster"):
    return target.to_cluster()
  if isinstance(target, str) and target.startswith("grpc://"):
    return cluster_from_target(target)
  raise PlacementError("real runs in this process need the cluster to place "
                       "on (cluster=...)")


def checked_problem(graph, target, cluster: Optional[Cluster] = None,
                    cost_model=None):
  """(PlacementProblem, Target): the target resolved and checked
  (`check_target`, with the cost model's calibration) before the problem
  of `graph` on `cluster` (default: the target's) is built.

  A cluster spec (a dict or a `RemoteCluster`) lists each server's task
  on the user's word; once the servers answer, each is asked which task it
  is (`server_tasks.check_served_tasks`, one tiny run per address), as
  `tfplace measure --cluster SPEC` does. A `LocalCluster` started its
  servers from its own spec and is not asked.

  Raises:
    MeasureError, ClusterError, PlacementError: see `resolve_target`,
      `check_target` and `target_cluster`; MeasureError also for a spec
      whose address i is not the servers' task i.
  """
  target = _servers_of_spec(target)
  cluster = cluster or target_cluster(target)
  resolved = resolve_target(target)
  check_target(resolved, cluster, calibration_of(cost_model))
  if isinstance(target, RemoteCluster):
    check_served_tasks(resolved.workers)
  return PlacementProblem.build(graph, cluster, cost_model), resolved


def calibration_of(cost_model) -> Optional["calibrated.Calibration"]:
  """The calibration a cost model uses, or None."""
  if isinstance(cost_model, calibrated.CalibratedCostModel):
    return cost_model.calibration
  return None
