"""Flag-free helpers shared by the verbs that run real steps (measure,
calibrate). Verb modules cannot import each other: their absl flags share
names, and absl rejects a second definition.
"""

import contextlib
import os
import sys
from typing import Dict, List, Optional, Tuple

from tfplace.errors import GraphImportError, TfplaceError

# The --cluster flag's help, the same for every verb that takes one.
CLUSTER_HELP = (
    "the cluster: a preset name (see `tfplace clusters`; local:N is this "
    "machine with its CPU as N logical CPUs), a cluster JSON "
    "file, the state file of `tfplace cluster up`, or a TF cluster spec JSON "
    '({"worker": ["host:port", ...]})')


# The --loop_trip_counts flag's help, the same for every verb that takes one.
LOOP_TRIP_COUNTS_HELP = (
    "trip counts of While loops the graph does not make static, "
    "loop=N,loop=N (a loop nested in another's body: outer/inner=N); the "
    "import error names the loops that need one")


def parse_loop_trip_counts(text: Optional[str]) -> Dict[str, int]:
  """{loop name: trip count} from "--loop_trip_counts while=35,other=2"."""
  counts: Dict[str, int] = {}
  for item in filter(None, (p.strip() for p in (text or "").split(","))):
    name, sep, value = item.rpartition("=")
    try:
      trips = int(value)
    except ValueError:
      trips = -1
    if not sep or not name or trips < 0:
      raise TfplaceError(f"--loop_trip_counts: {item!r} is not loop=N with "
                         "N a whole number >= 0")
    counts[name.strip()] = trips
  return counts


def load_graph_or_model(source: str, loop_trip_counts: Optional[str] = None,
                        batch_size: Optional[int] = None,
                        input_shapes: Optional[Dict[str, tuple]] = None):
  """A graph file, or a benchmark model name (GraphImportError if neither).

  Args:
    source: a graph file or a model name.
    loop_trip_counts: the --loop_trip_counts flag's value, for a graph file.
    batch_size: size of the graph file's placeholders' unknown first
      dimension (see `tfplace.graph.input_shapes`).
    input_shapes: placeholder name -> full shape, for a graph file.
  """
  from tfplace.models import registry
  if os.path.exists(source):
    from tfplace.graph.importers import import_graph
    return import_graph(source, loop_trip_counts=parse_loop_trip_counts(
        loop_trip_counts), batch_size=batch_size, input_shapes=input_shapes)
  if source in registry.list_models():
    if batch_size is not None or input_shapes:
      raise GraphImportError(
          f"--batch_size/--input_shapes size a graph file's placeholders; "
          f"the benchmark model {source!r} has its sizes from its builder")
    return registry.build_model(source)
  raise GraphImportError(f"{source!r} is neither a graph file nor a model "
                         f"name ({', '.join(registry.list_models())})")


def servers_from_cluster_arg(value: str, flag: str = "--cluster",
                             other_forms: str = "", check_tasks: bool = True
                             ) -> Tuple[object, List[str]]:
  """(RemoteCluster, profiler addresses) of the servers --cluster names,
  each checked reachable (a stale state file, whose servers are gone, then
  says so instead of failing later as a worker that died mid-run) and
  checked to be the task the spec lists it as
  (`server_tasks.check_served_tasks`: a spec in another order than the
  servers' own would name their profiles and liveness by the wrong task).

  A `tfplace cluster up` state file lists each worker's profiler address; a
  plain cluster spec does not, so its workers' server ports are used.
  `flag` and `other_forms` (what else the flag takes) are for the message.
  `check_tasks=False` leaves the task check to the caller (the real-run
  API's `checked_problem` asks a RemoteCluster's servers itself).
  """
  from tfplace.cli.cluster_arg import read_server_spec
  from tfplace.measurement.local_cluster import check_reachable
  from tfplace.measurement.server_tasks import check_served_tasks
  spec = read_server_spec(value)
  if spec is None:
    raise TfplaceError(f"{flag} {value!r} is neither a `tfplace cluster "
                       "up` state file nor a cluster spec JSON "
                       '({"worker": ["host:port", ...]})' + other_forms)
  remote = spec.remote()
  check_reachable(remote.addresses)
  if check_tasks:
    check_served_tasks(remote.addresses)
  return remote, list(spec.profiler_addresses or remote.profiler_addresses)


def exit_now_if_tf_busy(verb: str, error: Exception,
                        grace_s: float = 2.0) -> None:
  """After a real run failed on a dead TF server, TensorFlow calls may be
  left waiting in background threads until their deadlines (a run on a dead
  master), and a normal exit would wait for them
  (`tfplace.measurement.session`). If they do not end within `grace_s`,
  this prints the verb's one error line and exits with status 2 at once;
  otherwise it returns (the caller re-raises)."""
  from tfplace.measurement.session import wait_for_background
  if wait_for_background(timeout_s=grace_s):
    return
  sys.stdout.flush()
  sys.stderr.write(f"tfplace {verb}: error: {error}\n")
  sys.stderr.flush()
  _let_stderr_drain()
  os._exit(2)  # pylint: disable=protected-access


def _let_stderr_drain(timeout_s: float = 2.0) -> None:
  """Waits until a pipe on stderr (the quiet filter's, `cli.quiet`) has
  been read, so the last line reaches the terminal before `os._exit`."""
  import fcntl
  import stat
  import struct
  import termios
  import time
  if not stat.S_ISFIFO(os.fstat(2).st_mode):
    return
  deadline = time.monotonic() + timeout_s
  while time.monotonic() < deadline:
    unread = struct.unpack("i", fcntl.ioctl(2, termios.FIONREAD, b"\0" * 4))[0]
    if not unread:
      break
    time.sleep(0.01)
  time.sleep(0.05)  # the filter writes what it has just read


@contextlib.contextmanager
def native_stdout_to_stderr():
  """Sends what TF's C++ prints on stdout (e.g. the profiler's "Starting to
  trace ...") to stderr, so stdout holds only the result (`--json`)."""
  sys.stdout.flush()
  saved = os.dup(1)
  os.dup2(2, 1)
  try:
    yield
  finally:
    sys.stdout.flush()
    os.dup2(saved, 1)
    os.close(saved)


def cluster_and_cost_model(cluster_arg: str, cost_model: Optional[str],
                           calibration: Optional[str]):
  """(Cluster, CostModel) from the --cluster, --cost_model and --calibration
  flags of `place` and `simulate`.

  The cost model defaults to analytical, or calibrated when a calibration is
  given; a calibration also calibrates the cluster's links and overheads.

  Raises:
    ClusterError: the calibration was made for another cluster.
  """
  from tfplace.cli.cluster_arg import load_cluster_arg
  from tfplace.cost import calibrated
  from tfplace.cost.cost_models import get_cost_model
  if not cluster_arg:
    raise TfplaceError("--cluster is required (a preset name, a cluster JSON "
                       "file, a `tfplace cluster up` state file or a TF "
                       "cluster spec)")
  cluster = load_cluster_arg(cluster_arg)
  model = get_cost_model(
      cost_model or ("calibrated" if calibration else "analytical"),
      calibration)
  if calibration:
    loaded = (model.calibration
              if isinstance(model, calibrated.CalibratedCostModel)
              else calibrated.Calibration.load(calibration))
    calibrated.check_calibration_matches(loaded, cluster)
    cluster = calibrated.apply_calibration(cluster, loaded)
  return cluster, model


def calibration_coverage(graph, cluster, cost_model, placement):
  """How much of the placement's predicted op time rests on op types the
  calibration never saw (a `CalibrationCoverage`), or None when the cost
  model is not calibrated."""
  from tfplace.cost import calibrated
  if not isinstance(cost_model, calibrated.CalibratedCostModel):
    return None
  costs = cost_model.op_costs(graph, cluster)
  return calibrated.calibration_coverage(
      graph, cluster, cost_model.calibration, costs,
      placement.to_array(graph, cluster))


def coverage_fields(coverage) -> dict:
  """The JSON fields of a coverage (empty for None)."""
  if coverage is None:
    return {}
  return {"uncalibrated_share": coverage.uncalibrated_share,
          "unseen_op_types": dict(coverage.unseen)}
