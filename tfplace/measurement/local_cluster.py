"""A cluster of TensorFlow server processes on this machine (or real hosts).

Logical CPU devices of one process share its cores, so a placement cannot
change their step time. `LocalCluster` starts one `tf.distribute.Server`
process per worker (`python -m tfplace.measurement.worker_main`), each pinned to
its own core(s), on free 127.0.0.1 ports:

    with LocalCluster(num_workers=2) as lc:
      timing = measure(graph, placement, target=lc.target)

Devices are `/job:worker/replica:0/task:I/device:CPU:0`, and
`.../task:I/device:GPU:J` for the GPUs a worker is given
(`LocalCluster(worker_gpus=...)`: each worker sees only its own GPUs, through
CUDA_VISIBLE_DEVICES, and grows its GPU memory as needed). Each worker also
runs a TF profiler server on a port of its own (`profiler_addresses`), from
which `measure(..., trace_dir=...)` captures the workers' op timelines; a
worker whose profiler port is unusable falls back to its server port (TF
servers answer profiler requests too). `RemoteCluster` describes servers
someone else started (several hosts); both give a session `target`, the
`profiler_addresses` and a `to_cluster()` for the simulator.

`LocalCluster(..., benchmark=True)` (or `lc.benchmark()` once started)
measures the workers and links (`tfplace.measurement.cluster_benchmark`);
`to_cluster()` then describes the measured devices and links instead of
the rough per-core figures below.
"""

import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence, Tuple

from absl import logging

from tfplace.cost.cluster import LOOPBACK, Cluster, Device, Link, LinkSpec
from tfplace.cost.presets import PCIE3, gpu_figures
from tfplace.errors import MeasureError

JOB = "worker"
# Rough figures for one CPU core (FLOP/s of float32 matmul, memory bytes/s)
# and for gRPC over loopback; calibration replaces them.
CORE_PEAK_FLOPS = 2e10
CORE_MEMORY_BANDWIDTH = 1e10
LOOPBACK_LINK = LinkSpec(latency_s=2e-4, bandwidth=1e9, kind=LOOPBACK)
# Workers on different hosts: gRPC over the network (rough figures of a
# 10 Gb/s link until `tfplace cluster benchmark` measures each pair); its
# latency is in flight, not host work as loopback's is.
NETWORK_LINK = LinkSpec(latency_s=1e-4, bandwidth=1.25e9, kind="network")
# Host names that mean this machine.
_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0", ""}

# Session target -> the LocalClusters running in this process, so that
# `measure(config with target=lc.target)` finds their profilers and watches
# their worker processes.
_RUNNING: Dict[str, "LocalCluster"] = {}
# What a temporary log folder's name starts with.
LOG_DIR_PREFIX = "tfplace_cluster_"
# "true": TF's CPU memory comes from its BFC allocator, which keeps the
# statistics peak memory is read from. TF reads it once, when a process
# first needs CPU memory.
CPU_BFC_ENV = "TF_CPU_ALLOCATOR_USE_BFC"


def profiler_addresses_for(target: str) -> Tuple[str, ...]:
  """Profiler "host:port"s of the running LocalCluster whose target this is
  (empty if none in this process)."""
  lc = _RUNNING.get(target)
  return tuple(lc.profiler_addresses) if lc else ()


def workers_for(target: str) -> Tuple[List[str], List[subprocess.Popen]]:
  """(worker addresses, worker processes) of the running LocalCluster whose
  target this is; ([], []) if none in this process."""
  lc = _RUNNING.get(target)
  return (list(lc.addresses), list(lc.processes)) if lc else ([], [])


def worker_device(task: int, job: str = JOB, kind: str = "CPU",
                  index: int = 0) -> str:
  return f"/job:{job}/replica:0/task:{task}/device:{kind}:{index}"


def parse_worker_gpus(values: Sequence[str], num_workers: int
                      ) -> Tuple[Tuple[int, ...], ...]:
  """Per worker, the GPU ids (of this machine) it is given, from one entry
  per worker: ids joined by "+" ("0", "0+1"), or "" / "none" for no GPU;
  workers past the last entry get none.

  Raises:
    MeasureError: an id that is not a number >= 0, or as
      `checked_worker_gpus`.
  """
  out = []
  for task, value in enumerate(values):
    value = value.strip()
    parts = [] if value.lower() in ("", "none") else value.split("+")
    for part in parts:
      if not part.strip().isdigit():
        raise MeasureError(
            f"worker {task}: GPU {part!r} is not a GPU id; write ids joined "
            'by "+" (e.g. 0+1), or "none"')
    out.append([int(part) for part in parts])
  return checked_worker_gpus(out, num_workers)


def checked_worker_gpus(worker_gpus: Sequence[Sequence[int]],
                        num_workers: int) -> Tuple[Tuple[int, ...], ...]:
  """`worker_gpus` (per worker, GPU ids), padded with none to `num_workers`.

  Raises:
    MeasureError: more entries than workers, or a GPU given to two workers
      (each would reserve its memory).
  """
  if len(worker_gpus) > num_workers:
    raise MeasureError(f"{len(worker_gpus)} GPU entries for {num_workers} "
                       "worker(s); give one entry per worker")
  seen = {}
  for task, ids in enumerate(worker_gpus):
    for gpu in ids:
      if gpu in seen:
        raise MeasureError(f"GPU {gpu} is given to workers {seen[gpu]} and "
                           f"{task}; give each GPU to one worker")
      seen[gpu] = task
  out = [tuple(int(g) for g in ids) for ids in worker_gpus]
  return tuple(out + [()] * (num_workers - len(out)))


def free_ports(count: int) -> List[int]:
  """`count` distinct TCP ports free on 127.0.0.1 right now."""
  sockets, ports = [], []
  try:
    for _ in range(count):
      s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
      s.bind(("127.0.0.1", 0))
      sockets.append(s)
      ports.append(s.getsockname()[1])
  finally:
    for s in sockets:
      s.close()
  return ports


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
    try:
      s.bind((host, port))
    except OSError:
      return True
  return False


def reachable(address: str, timeout_s: float = 0.5) -> bool:
  host, _, port = address.rpartition(":")
  try:
    socket.create_connection((host, int(port)), timeout=timeout_s).close()
    return True
  except (OSError, ValueError):
    return False


def server_host(address: str) -> str:
  """The host of a "host:port" server address ("localhost" for any name
  of this machine)."""
  host = address.replace("grpc://", "").rpartition(":")[0].strip("[]")
  if host in _LOCAL_HOSTS or host == socket.gethostname():
    return "localhost"
  return host


def check_reachable(addresses: Sequence[str], timeout_s: float = 2.0) -> None:
  """Raises MeasureError unless each "host:port" accepts a TCP connection."""
  for address in addresses:
    host, _, port = address.replace("grpc://", "").rpartition(":")
    try:
      socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except (OSError, ValueError) as e:
      raise MeasureError(
          f"TF server {address} is not reachable: {e}; is the server running "
          "(`tfplace cluster up`, or tf.distribute.Server on that host) and "
          "the address right?") from None


def _usable_cores() -> List[int]:
  """The cores this process may run on."""
  return (sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
          else list(range(os.cpu_count() or 1)))


def shared_cores(num_workers: int, cores_per_worker: int,
                 usable: int) -> Optional[str]:
  """Why pinned workers would share cores, or None if each has its own."""
  needed = num_workers * cores_per_worker
  if needed <= usable:
    return None
  return (f"{num_workers} worker(s) x {cores_per_worker} core(s) need "
          f"{needed} cores, and {usable} can be used here: workers share "
          "cores and slow each other's steps, so measurements and "
          "calibrations on this cluster describe that sharing, not the "
          "workers alone (fewer --workers or --cores_per_worker give each "
          "its own)")


def _memory_bytes() -> float:
  try:
    return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
  except (ValueError, OSError, AttributeError):
    return 8e9


def listed_worker_gpus(target: str, timeout_s: float = 30.0
                       ) -> Tuple[Tuple[float, ...], ...]:
  """Per `/job:worker` task (0, 1, ... while the server at `target` lists
  its CPU), the memory limit in bytes of each GPU the servers list for it.

  Raises:
    MeasureError: the server is unreachable, or lists no worker CPUs.
  """
  import tensorflow as tf
  from tfplace.measurement.session import first_line, session_config
  check_reachable([target])
  try:
    config = session_config(remote=True, timeout_s=timeout_s)
    with tf.compat.v1.Session(target, config=config) as sess:
      memory = {d.name: float(d.memory_limit_bytes)
                for d in sess.list_devices()}
  except tf.errors.OpError as e:
    raise MeasureError(f"cannot list the devices of {target}: "
                       f"{first_line(e)}") from None
  gpus = []
  while worker_device(len(gpus)) in memory:
    task, listed = len(gpus), []
    while worker_device(task, kind="GPU", index=len(listed)) in memory:
      listed.append(memory[worker_device(task, kind="GPU",
                                         index=len(listed))])
    gpus.append(tuple(listed))
  if not gpus:
    raise MeasureError(f"{target} lists no /job:worker CPU devices; pass its "
                       'cluster spec as --cluster {"worker": [...]}')
  return tuple(gpus)


def cluster_from_target(target: str, timeout_s: float = 30.0) -> Cluster:
  """The Cluster of the `/job:worker` CPUs and GPUs that the server at
  `target` lists.

  Raises:
    MeasureError: the server is unreachable, or lists no worker CPUs.
  """
  gpus = listed_worker_gpus(target, timeout_s)
  return make_worker_cluster(len(gpus), name="tf_servers",
                             gpus_per_worker=[len(g) for g in gpus],
                             gpu_memory_bytes=smallest_memory(gpus))


def smallest_memory(gpus: Sequence[Sequence[float]]) -> Optional[float]:
  """The smallest memory of the listed GPUs (None if none)."""
  return min((m for listed in gpus for m in listed), default=None)


def _worker_env(gpus: Sequence[int] = ()) -> Dict[str, str]:
  """The environment of a worker process: ours, with TF's GRPC_FAIL_FAST on
  (unless set), so that a worker's RPCs to a dead peer fail at once instead
  of waiting for it until their deadline (the master's clean-up after a
  worker died would otherwise block the client's `Session.close()`), and
  only the GPUs it is given (none by default): on a GPU machine each worker
  would otherwise open every GPU, the first starving the next. Its CPU
  memory comes from TF's BFC allocator (unless set), which keeps the
  statistics a measurement's peak memory is read from
  (`tfplace.measurement.timing.peak_memory`); TF's default CPU allocator
  keeps none."""
  env = dict(os.environ)
  env.setdefault("GRPC_FAIL_FAST", "true")
  env.setdefault(CPU_BFC_ENV, "true")
  env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, gpus))
  return env


def remove_log_dir(path: str) -> None:
  """Removes a worker log directory (a failure is logged, never raised)."""
  try:
    shutil.rmtree(path)
  except FileNotFoundError:
    pass
  except OSError as e:
    logging.warning("could not remove the worker logs in %s: %s", path, e)


def make_worker_cluster(num_workers: int, cores_per_worker: int = 1,
                        name: str = "local_servers",
                        link: LinkSpec = LOOPBACK_LINK,
                        gpus_per_worker: Sequence[int] = (),
                        gpu_memory_bytes: Optional[float] = None) -> Cluster:
  """A Cluster of `/job:worker/.../task:i/device:CPU:0` devices, and
  `.../task:i/device:GPU:j` for `gpus_per_worker[i]` GPUs (datasheet
  figures of a V100 until measured; `gpu_memory_bytes`, the memory the
  servers list, else a V100's), each linked to its worker's CPU by PCIe;
  the workers talk over `link`.

  A worker runs as many ops at once as it has cores (`slots`: its
  inter-op thread pool, `worker_main`); the calibration fits op times on
  traced durations taken while they overlap, so one slot on a 4-core
  worker predicted its one-device steps 1.4-3.4x too slow (GPU servers,
  2026-11-26; 0.9-1.8x with four).

  With one core per worker and no GPU its transfers are rendezvous
  transfers (`Cluster.rendezvous_transfers`): the gRPC runtime serializes
  and parses a tensor on the cores that also compute, and only when the
  worker has no op left to run (`scripts/send_delay.py`: a message waits
  as long as either end computes).
  """
  memory = _memory_bytes() / max(1, num_workers)
  gpus = list(gpus_per_worker) + [0] * (num_workers - len(gpus_per_worker))
  flops, bandwidth, gpu_memory, *half = gpu_figures("")
  gpu_memory = gpu_memory_bytes or gpu_memory
  devices, links = [], []
  for i in range(num_workers):
    devices.append(Device(
        name=worker_device(i), type="CPU",
        peak_flops=CORE_PEAK_FLOPS * cores_per_worker,
        memory_bandwidth=CORE_MEMORY_BANDWIDTH, memory_bytes=memory,
        launch_overhead_s=1e-5, slots=cores_per_worker))
    for j in range(gpus[i]):
      gpu = worker_device(i, kind="GPU", index=j)
      devices.append(Device(name=gpu, type="GPU", peak_flops=flops,
                            memory_bandwidth=bandwidth,
                            memory_bytes=gpu_memory, launch_overhead_s=5e-6,
                            half_flops=half[0] if half else 0.0))
      links.append(Link(worker_device(i), gpu, PCIE3.latency_s,
                        PCIE3.bandwidth, PCIE3.kind))
  return Cluster(name=name, devices=tuple(devices), links=tuple(links),
                 default_link=link,
                 rendezvous_transfers=cores_per_worker == 1 and not any(gpus))


@dataclasses.dataclass(frozen=True)
class RemoteCluster:
  """TF servers started elsewhere, e.g. one per host: `{"worker": [...]}`,
  with `gpus_per_worker[i]` GPUs on worker i (none if not given;
  `with_listed_gpus()` asks the servers)."""
  cluster_spec: Dict[str, List[str]]
  cores_per_worker: int = 1
  gpus_per_worker: Tuple[int, ...] = ()
  gpu_memory_bytes: Optional[float] = None

  @property
  def addresses(self) -> List[str]:
    return list(self.cluster_spec.get(JOB, []))

  @property
  def target(self) -> str:
    if not self.addresses:
      raise MeasureError(f"the cluster spec has no {JOB!r} job: "
                         f"{self.cluster_spec}")
    return "grpc://" + self.addresses[0]

  @property
  def profiler_addresses(self) -> List[str]:
    """Where to send profiler requests: the servers themselves (a TF server
    serves the profiler service on its own port)."""
    return self.addresses

  def to_cluster(self) -> Cluster:
    """The servers as a Cluster: workers on one host talk over loopback,
    workers on different hosts over the network (each pair measured by
    `tfplace cluster benchmark`)."""
    hosts = [server_host(a) for a in self.addresses]
    one_host = len(set(hosts)) <= 1
    cluster = make_worker_cluster(len(self.addresses), self.cores_per_worker,
                                  name="tf_servers",
                                  link=LOOPBACK_LINK if one_host
                                  else NETWORK_LINK,
                                  gpus_per_worker=self.gpus_per_worker,
                                  gpu_memory_bytes=self.gpu_memory_bytes)
    if one_host:
      return cluster
    shared = tuple(
        Link(worker_device(i), worker_device(j), LOOPBACK_LINK.latency_s,
             LOOPBACK_LINK.bandwidth, LOOPBACK)
        for i in range(len(hosts)) for j in range(i + 1, len(hosts))
        if hosts[i] == hosts[j])
    return dataclasses.replace(cluster, links=cluster.links + shared)

  def with_listed_gpus(self, timeout_s: float = 30.0) -> "RemoteCluster":
    """This cluster with the GPUs its running servers list per worker.

    Raises:
      MeasureError: the servers are unreachable, or list another number of
        workers than the spec has.
    """
    gpus = listed_worker_gpus(self.target, timeout_s)
    if len(gpus) != len(self.addresses):
      raise MeasureError(
          f"the servers list {len(gpus)} worker(s), the cluster spec has "
          f"{len(self.addresses)}: {self.addresses}; give the spec the "
          "servers were started with")
    return dataclasses.replace(self,
                               gpus_per_worker=tuple(len(g) for g in gpus),
                               gpu_memory_bytes=smallest_memory(gpus))

  @classmethod
  def from_json(cls, text: str, cores_per_worker: int = 1,
                gpus_per_worker: Sequence[int] = (),
                gpu_memory_bytes: Optional[float] = None) -> "RemoteCluster":
    """Parses `{"worker": ["host:port", ...]}`; raises MeasureError."""
    try:
      spec = json.loads(text)
    except json.JSONDecodeError as e:
      raise MeasureError(f"--cluster_spec is not valid JSON: {e}") from None
    if (not isinstance(spec, dict) or not isinstance(spec.get(JOB), list)
        or not spec[JOB] or not all(isinstance(a, str) and ":" in a
                                    for a in spec[JOB])):
      raise MeasureError('a cluster spec must look like {"worker": '
                         '["host:port", ...]}')
    return cls(cluster_spec={JOB: list(spec[JOB])},
               cores_per_worker=cores_per_worker,
               gpus_per_worker=tuple(int(g) for g in gpus_per_worker),
               gpu_memory_bytes=gpu_memory_bytes)


class _WorkerExited(MeasureError):
  """A worker process exited before its server came up."""


class LocalCluster:
  """TF server processes on 127.0.0.1, one per worker, pinned to cores."""

  def __init__(self, num_workers: int = 2, cores_per_worker: int = 1,
               base_port: Optional[int] = None, start_timeout_s: float = 120.0,
               detached: bool = False, log_dir: Optional[str] = None,
               keep_logs: bool = False, benchmark: bool = False,
               worker_gpus: Sequence[Sequence[int]] = ()):
    """Describes the cluster; `start()` (or `with`) launches it.

    Args:
      num_workers: server processes.
      cores_per_worker: cores each is pinned to (round robin over the cores
        this process may use; shared when there are too few).
      base_port: first port (workers use base_port + i, their profiler
        servers base_port + num_workers + i); None picks free ones.
      start_timeout_s: how long to wait for every server to accept
        connections.
      detached: start workers in their own session (they outlive us; the
        `tfplace cluster up` case).
      log_dir: where worker logs go (None: a temporary `tfplace_cluster_*`
        directory, removed by `stop()` unless `keep_logs`, or unless a
        worker failed to start: its log says why).
      keep_logs: keep the temporary log directory after `stop()`.
      benchmark: measure the devices and links once started (a few
        seconds; see `benchmark`).
      worker_gpus: per worker, the ids of this machine's GPUs it is given
        (`parse_worker_gpus` reads them from a flag's text); workers past
        the last entry get none.
    """
    if num_workers < 1 or cores_per_worker < 1:
      raise MeasureError("num_workers and cores_per_worker must be >= 1")
    self.worker_gpus = checked_worker_gpus(worker_gpus, num_workers)
    self.num_workers = num_workers
    self.cores_per_worker = cores_per_worker
    self.base_port = base_port
    self.start_timeout_s = start_timeout_s
    self.detached = detached
    self.log_dir = log_dir
    self.keep_logs = keep_logs
    self.owns_log_dir = False  # True once we made a temporary one
    self.ports: List[int] = []
    self.profiler_ports: List[Optional[int]] = []
    self.processes: List[subprocess.Popen] = []
    self.run_benchmark = benchmark
    self.measured = None  # The ClusterBenchmark, once measured.
    self.gpu_memory_bytes = None  # What the GPUs list, once started.

  # ---- description -------------------------------------------------------

  @property
  def addresses(self) -> List[str]:
    return [f"127.0.0.1:{p}" for p in self.ports]

  @property
  def cluster_spec(self) -> Dict[str, List[str]]:
    return {JOB: self.addresses}

  @property
  def target(self) -> str:
    if not self.ports:
      raise MeasureError("the local cluster is not started")
    return "grpc://" + self.addresses[0]

  @property
  def profiler_addresses(self) -> List[str]:
    """Each worker's profiler server, or its TF server where it has none."""
    return [f"127.0.0.1:{p}" if p else a
            for p, a in zip(self.profiler_ports, self.addresses)]

  @property
  def pids(self) -> List[int]:
    return [p.pid for p in self.processes]

  @property
  def gpus_per_worker(self) -> Tuple[int, ...]:
    return tuple(len(ids) for ids in self.worker_gpus)

  def _plain_cluster(self) -> Cluster:
    return make_worker_cluster(self.num_workers, self.cores_per_worker,
                               gpus_per_worker=self.gpus_per_worker,
                               gpu_memory_bytes=self.gpu_memory_bytes)

  def to_cluster(self) -> Cluster:
    """The workers as a Cluster: measured once `benchmark` ran."""
    cluster = self._plain_cluster()
    return self.measured.apply(cluster) if self.measured else cluster

  def benchmark(self, config=None, progress: bool = False):
    """Measures the running workers and links; `to_cluster()` uses the
    figures from now on.

    Args:
      config: a `MeasureConfig` (its target is this cluster's); default
        `MeasureConfig(target=self.target)`.
      progress: show a tqdm bar.

    Returns:
      The `ClusterBenchmark`.
    """
    from tfplace.measurement.cluster_benchmark import benchmark_cluster
    from tfplace.measurement.config import MeasureConfig
    config = (config or MeasureConfig()).replace(target=self.target)
    self.measured = benchmark_cluster(self._plain_cluster(), config,
                                      progress=progress)
    return self.measured

  def core_sets(self) -> List[List[int]]:
    """The cores each worker is pinned to (round the cores this process may
    use: more workers x cores than that share cores; `shared_cores` says
    so)."""
    cores = _usable_cores()
    out, k = [], 0
    for _ in range(self.num_workers):
      out.append([cores[(k + j) % len(cores)]
                  for j in range(self.cores_per_worker)])
      k += self.cores_per_worker
    return [sorted(set(c)) for c in out]

  # ---- life cycle --------------------------------------------------------

  def __enter__(self) -> "LocalCluster":
    self.start()
    return self

  def __exit__(self, *exc) -> None:
    self.stop()

  def start(self) -> "LocalCluster":
    """Launches the workers and waits until each accepts connections.

    With free ports chosen for us, a worker that exits while starting (its
    port taken in the meantime) is retried once on new ports.

    Raises:
      MeasureError: a port is taken, a worker exits, or the wait times out.
    """
    if self.processes:
      return self
    shared = shared_cores(self.num_workers, self.cores_per_worker,
                          len(_usable_cores()))
    if shared:
      logging.warning("%s", shared)
    attempts = 1 if self.base_port is not None else 2
    for attempt in range(attempts):
      try:
        return self._start_once()
      except _WorkerExited as e:
        if attempt + 1 == attempts:
          raise MeasureError(str(e)) from None
        logging.warning("%s; retrying on other ports", e)
    return self

  def _start_once(self) -> "LocalCluster":
    self.ports, self.profiler_ports = self._choose_ports()
    spec = json.dumps(self.cluster_spec)
    if not self.log_dir:
      self.log_dir = tempfile.mkdtemp(prefix=LOG_DIR_PREFIX)
      self.owns_log_dir = True
    log_dir = self.log_dir
    os.makedirs(log_dir, exist_ok=True)
    for task, cores in enumerate(self.core_sets()):
      log = open(os.path.join(log_dir, f"worker_{task}.log"), "ab")
      ready = self._ready_file(task)
      if os.path.exists(ready):
        os.remove(ready)
      cmd = self._worker_command(task, cores, spec, ready,
                                 self.profiler_ports[task] or 0)
      self.processes.append(subprocess.Popen(
          cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
          start_new_session=self.detached,
          env=_worker_env(self.worker_gpus[task])))
      log.close()
    try:
      self._wait_until_up()
      self._check_profilers()
      self._check_gpus()
    except BaseException:
      self.stop(keep_logs=True)  # the logs say why
      raise
    _RUNNING[self.target] = self
    logging.info("local cluster up: %s, profilers %s (logs in %s)",
                 self.addresses, self.profiler_addresses, log_dir)
    if self.run_benchmark:
      try:
        self.benchmark()
      except BaseException:
        self.stop()
        raise
    return self

  def _worker_command(self, task: int, cores: Sequence[int], spec: str,
                      ready: str, profiler_port: int = 0) -> List[str]:
    """The command line of worker `task` (`worker_main`). Workers that are
    not detached exit once this process is gone, even when it is killed
    before it can stop them."""
    cmd = [sys.executable, "-m", "tfplace.measurement.worker_main",
           "--task", str(task), "--spec", spec,
           "--cores", ",".join(map(str, cores)),
           "--profiler_port", str(profiler_port), "--ready_file", ready]
    if not self.detached:
      cmd += ["--parent_pid", str(os.getpid())]
    return cmd

  def _choose_ports(self) -> Tuple[List[int], List[Optional[int]]]:
    """(server ports, profiler ports); a busy profiler port becomes None."""
    n = self.num_workers
    if self.base_port is None:
      ports = free_ports(2 * n)
      return ports[:n], list(ports[n:])
    ports = [self.base_port + i for i in range(n)]
    busy = [p for p in ports if port_in_use(p)]
    if busy:
      raise MeasureError(f"port(s) {busy} on 127.0.0.1 are in use; choose "
                         "another --base_port or leave it unset")
    profiler = [self.base_port + n + i for i in range(n)]
    for p in profiler:
      if port_in_use(p):
        logging.warning("profiler port %d on 127.0.0.1 is in use; that "
                        "worker is profiled through its server port", p)
    return ports, [None if port_in_use(p) else p for p in profiler]

  def _wait_until_up(self) -> None:
    deadline = time.monotonic() + self.start_timeout_s
    pending = set(range(self.num_workers))
    while pending:
      for task in sorted(pending):
        proc = self.processes[task]
        if proc.poll() is not None:
          raise _WorkerExited(
              f"worker {task} exited with status {proc.returncode} while "
              f"starting; see {self.log_dir}/worker_{task}.log")
        if reachable(self.addresses[task]):
          pending.discard(task)
      if pending and time.monotonic() > deadline:
        raise MeasureError(
            f"worker(s) {sorted(pending)} did not come up within "
            f"{self.start_timeout_s:.0f} s; see logs in {self.log_dir}")
      if pending:
        time.sleep(0.2)

  def _check_gpus(self) -> None:
    """Raises MeasureError unless each worker lists the GPUs it was given
    (a CPU-only TensorFlow, no driver, or no such GPU lists fewer); keeps
    their memory."""
    if not any(self.worker_gpus):
      return
    listed = listed_worker_gpus(self.target)
    for task, (ids, memory) in enumerate(zip(self.worker_gpus, listed)):
      count = len(memory)
      if count != len(ids):
        raise MeasureError(
            f"worker {task} was given GPU(s) {'+'.join(map(str, ids))} but "
            f"its TensorFlow lists {count} GPU(s) (a CPU-only TensorFlow, "
            "no CUDA driver, or no such GPU here?); see "
            f"{self.log_dir}/worker_{task}.log")
    self.gpu_memory_bytes = smallest_memory(listed)

  def _ready_file(self, task: int) -> str:
    return os.path.join(self.log_dir, f"worker_{task}.ready.json")

  def _check_profilers(self, timeout_s: float = 5.0) -> None:
    """Drops the profiler port of a worker that reports it has none (its
    port was taken meanwhile); it is then profiled through its server."""
    deadline = time.monotonic() + timeout_s
    for task, port in enumerate(self.profiler_ports):
      path = self._ready_file(task)
      while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
      try:
        with open(path) as f:
          started = json.load(f).get("profiler_port")
      except (OSError, ValueError):
        continue  # no word from the worker: keep the port we gave it
      if port and not started:
        logging.warning("worker %d has no profiler server on port %d (see "
                        "its log); it is profiled through its server port",
                        task, port)
        self.profiler_ports[task] = None

  def stop(self, timeout_s: float = 10.0,
           keep_logs: Optional[bool] = None) -> None:
    """Terminates the workers this object started, waits for them and
    removes the temporary log directory it made (unless `keep_logs`;
    default: the constructor's)."""
    if self.ports and _RUNNING.get(self.target) is self:
      del _RUNNING[self.target]
    for proc in self.processes:
      if proc.poll() is None:
        proc.terminate()
    deadline = time.monotonic() + timeout_s
    for proc in self.processes:
      try:
        proc.wait(timeout=max(0.1, deadline - time.monotonic()))
      except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    self.processes = []
    keep = self.keep_logs if keep_logs is None else keep_logs
    if self.owns_log_dir and not keep and self.log_dir:
      remove_log_dir(self.log_dir)
      self.log_dir, self.owns_log_dir = None, False

  def alive(self) -> List[bool]:
    return [p.poll() is None for p in self.processes]

  def state(self) -> dict:
    """What `tfplace cluster up` saves: pids, ports, spec, cores."""
    return {"format": "tfplace.local_cluster/1", "pids": self.pids,
            "ports": self.ports, "cluster_spec": self.cluster_spec,
            "profiler_ports": self.profiler_ports,
            "profiler_addresses": self.profiler_addresses,
            "target": self.target, "cores": self.core_sets(),
            "cores_per_worker": self.cores_per_worker,
            "worker_gpus": [list(ids) for ids in self.worker_gpus],
            "gpus_per_worker": list(self.gpus_per_worker),
            "gpu_memory_bytes": self.gpu_memory_bytes,
            "log_dir": self.log_dir, "owns_log_dir": self.owns_log_dir,
            **({"cluster": self.to_cluster().to_dict(),
                "benchmark": self.measured.to_dict()} if self.measured
               else {})}
