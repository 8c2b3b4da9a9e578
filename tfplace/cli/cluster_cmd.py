"""start/stop a local TensorFlow server cluster.

usage: tfplace cluster up [--workers 2] [--cores_per_worker 1]
                          [--worker_gpus 0,none] [--base_port P]
                          [--state FILE] [--nobenchmark]
       tfplace cluster down [--state FILE] [--keep_logs]
       tfplace cluster status [--state FILE | --cluster_spec JSON] [--json]
       tfplace cluster benchmark [--state FILE | --cluster_spec JSON]
                                 [--out cluster.json] [--json]

`up` starts detached `tf.distribute.Server` processes on 127.0.0.1, each
pinned to its own core(s) and given the GPUs --worker_gpus lists for it
(one entry per worker: GPU ids joined by "+", or "none"; default none),
measures them (matmul and convolution FLOP/s, the convolutions' vector
lanes, copy bandwidth, per-op and empty-step overheads per worker;
per-message cost, latency and bandwidth per pair:
`tfplace.measurement.cluster_benchmark`; --nobenchmark skips it), prints
the figures and writes pids, ports, profiler ports and the measured cluster
to the state file;
`tfplace measure/simulate/place --cluster FILE` then use them. `down` stops
exactly the processes the state file lists, removes the state file and their
temporary log folder (`tfplace_cluster_*`; --keep_logs keeps it); to
simulate on the measured cluster afterwards, write it first with
`benchmark --out cluster.json` (or copy the state file). `status` tells which
workers are alive and reachable (with --cluster_spec: servers on real hosts,
each also asked which task it serves) and exits with status 2 when one is
not, or when a spec's address i is not the servers' task i. `benchmark` measures running
servers again (the state file's, updated in place, or those of a cluster
spec of real hosts; it asks the servers for their GPUs) and with --out
writes the measured cluster JSON (for --cluster anywhere).
"""

import json
import os
import signal
import sys
import tempfile
import time
from typing import List

from absl import flags

from tfplace.errors import TfplaceError

_WORKERS = flags.DEFINE_integer("workers", 2, "server processes to start")
_CORES = flags.DEFINE_integer("cores_per_worker", 1, "cores pinned per worker")
_WORKER_GPUS = flags.DEFINE_list(
    "worker_gpus", [], "`up`: per worker, the GPU ids it is given, joined by "
    '"+" ("0+1"), or "none"; workers past the last entry get none')
_BASE_PORT = flags.DEFINE_integer("base_port", None,
                                  "first port (default: free ports)")
_STATE = flags.DEFINE_string(
    "state", os.path.join(tempfile.gettempdir(), "tfplace_cluster.json"),
    "state file of the running cluster")
_SPEC = flags.DEFINE_string("cluster_spec", None,
                            'servers to check: {"worker": ["host:port", ...]}')
_JSON = flags.DEFINE_bool("json", False, "print the result as JSON")
_KEEP_LOGS = flags.DEFINE_bool(
    "keep_logs", False, "down: keep the workers' temporary log folder")
_BENCHMARK = flags.DEFINE_bool(
    "benchmark", True, "`up`: measure the workers and links once started")
_OUT = flags.DEFINE_string(
    "out", None, "`benchmark`: write the measured cluster JSON here")


def _read_state(path: str) -> dict:
  try:
    with open(path) as f:
      return json.load(f)
  except FileNotFoundError:
    raise TfplaceError(f"no cluster state file {path}; start one with "
                       "`tfplace cluster up`") from None
  except json.JSONDecodeError as e:
    raise TfplaceError(f"{path} is not a cluster state file: {e}") from None


def _is_our_worker(pid: int) -> bool:
  try:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
      cmdline = f.read()
  except OSError:
    return False
  return b"tfplace.measurement.worker_main" in cmdline


def _up() -> None:
  from tfplace.io_utils import atomic_write
  from tfplace.measurement.local_cluster import (LocalCluster,
                                                 parse_worker_gpus)
  gpus = parse_worker_gpus(_WORKER_GPUS.value, _WORKERS.value)
  if os.path.exists(_STATE.value):
    state = _read_state(_STATE.value)
    if any(_is_our_worker(p) for p in state.get("pids", [])):
      raise TfplaceError(f"a cluster is already up ({_STATE.value}); run "
                         "`tfplace cluster down` first")
  lc = LocalCluster(num_workers=_WORKERS.value, cores_per_worker=_CORES.value,
                    base_port=_BASE_PORT.value, detached=True,
                    worker_gpus=gpus)
  lc.start()
  try:
    if _BENCHMARK.value:
      lc.benchmark(progress=True)
    atomic_write(_STATE.value, json.dumps(lc.state(), indent=1))
  except BaseException:
    lc.stop()
    raise
  sys.stdout.write(f"cluster up: {', '.join(lc.addresses)} (target "
                   f"{lc.target}; profilers "
                   f"{','.join(lc.profiler_addresses)}); state in "
                   f"{_STATE.value}\n")
  if lc.measured:
    sys.stdout.write(lc.measured.describe() + "\n")


def _down() -> None:
  state = _read_state(_STATE.value)
  pids = [p for p in state.get("pids", []) if _is_our_worker(p)]
  for pid in pids:
    os.kill(pid, signal.SIGTERM)
  deadline = time.monotonic() + 10
  while time.monotonic() < deadline and any(_is_our_worker(p) for p in pids):
    time.sleep(0.1)
  for pid in pids:
    if _is_our_worker(pid):
      os.kill(pid, signal.SIGKILL)
  os.remove(_STATE.value)
  logs = _owned_log_dir(state)
  if logs and not _KEEP_LOGS.value:
    from tfplace.measurement.local_cluster import remove_log_dir
    remove_log_dir(logs)
    logs = None
  kept = f"; worker logs kept in {logs}" if logs else ""
  sys.stdout.write(f"cluster down: stopped {len(pids)} worker(s), removed "
                   f"{_STATE.value}{kept}\n")


def _owned_log_dir(state: dict):
  """The temporary log folder `up` made (None for one the user chose)."""
  from tfplace.measurement.local_cluster import LOG_DIR_PREFIX
  path = state.get("log_dir")
  if not path or not os.path.isdir(path):
    return None
  if "owns_log_dir" in state:
    return path if state["owns_log_dir"] else None
  # State files written before `owns_log_dir`: a tfplace_cluster_* folder
  # in the temp dir is ours.
  ours = (os.path.basename(path).startswith(LOG_DIR_PREFIX) and
          os.path.dirname(os.path.abspath(path)) == tempfile.gettempdir())
  return path if ours else None


def _status() -> None:
  from tfplace.measurement.local_cluster import RemoteCluster, reachable
  if _SPEC.value:
    addresses, pids = RemoteCluster.from_json(_SPEC.value).addresses, []
  else:
    state = _read_state(_STATE.value)
    addresses, pids = state["cluster_spec"]["worker"], state.get("pids", [])
  rows = []
  for task, address in enumerate(addresses):
    pid = pids[task] if task < len(pids) else None
    rows.append({"task": task, "address": address, "pid": pid,
                 "alive": _is_our_worker(pid) if pid else None,
                 "reachable": reachable(address)})
  wrong = _ask_tasks(rows) if _SPEC.value else []
  if _JSON.value:
    sys.stdout.write(json.dumps({"workers": rows}) + "\n")
  else:
    for r in rows:
      sys.stdout.write(_status_line(r) + "\n")
  down = [r for r in rows if r["alive"] is False or not r["reachable"]]
  from tfplace.errors import MeasureError
  if down:
    raise MeasureError(
        f"{len(down)} of {len(rows)} worker(s) down: " + "; ".join(
            f"task {r['task']} ({r['address']}) "
            f"{'dead' if r['alive'] is False else 'unreachable'}"
            for r in down) + "; restart the cluster (`tfplace cluster down`"
        ", then `tfplace cluster up`)")
  if wrong:
    more = (f"; {len(wrong) - 1} more address(es) not the task listed either"
            if len(wrong) > 1 else "")
    raise MeasureError(wrong[0] + more)


def _ask_tasks(rows: List[dict]) -> List[str]:
  """Asks each reachable server of a --cluster_spec which task it is
  (`server_tasks.served_task`, one tiny run each): sets each row's "serves"
  ("/job:worker/task:i", None if not asked or not told) and returns why each
  address is not the task the spec lists it as."""
  from tfplace.errors import MeasureError
  from tfplace.measurement.server_tasks import served_task, task_mismatch
  wrong = []
  for r in rows:
    r["serves"] = None
    if not r["reachable"]:
      continue
    try:
      own, listed = served_task(r["address"])
    except MeasureError as e:
      wrong.append(str(e))
      continue
    r["serves"] = f"/job:{own[0]}/task:{own[1]}" if own else None
    why = task_mismatch(r["address"], r["task"], len(rows), own, listed)
    if why:
      wrong.append(why)
  return wrong


def _status_line(row: dict) -> str:
  """One worker's line of `cluster status`."""
  pid = "" if row["pid"] is None else f" pid {row['pid']}"
  alive = ("" if row["alive"] is None else
           (" alive" if row["alive"] else " dead"))
  serves = f", serves {row['serves']}" if row.get("serves") else ""
  return (f"task {row['task']} {row['address']}{pid}{alive}, "
          f"{'reachable' if row['reachable'] else 'UNREACHABLE'}{serves}")


def _benchmark() -> None:
  from tfplace.io_utils import atomic_write, check_out_path
  from tfplace.measurement.cluster_benchmark import benchmark_cluster
  from tfplace.measurement.config import MeasureConfig
  from tfplace.measurement.local_cluster import RemoteCluster, check_reachable
  from tfplace.measurement.server_tasks import check_served_tasks
  if _OUT.value:  # Optional: the state file is updated in place anyway.
    check_out_path(_OUT.value, inputs=[_STATE.value, _SPEC.value])
  if _SPEC.value:
    state, remote = None, RemoteCluster.from_json(_SPEC.value)
  else:
    state = _read_state(_STATE.value)
    remote = RemoteCluster.from_json(json.dumps(state["cluster_spec"]),
                                     int(state.get("cores_per_worker", 1)))
  check_reachable(remote.addresses)
  check_served_tasks(remote.addresses)  # links are named by address
  remote = remote.with_listed_gpus()  # what the servers have
  plain = remote.to_cluster()
  bench = benchmark_cluster(plain, MeasureConfig(target=remote.target))
  measured = bench.apply(plain)
  if state is not None:
    state.update(cluster=measured.to_dict(), benchmark=bench.to_dict())
    atomic_write(_STATE.value, json.dumps(state, indent=1))
  if _OUT.value:
    atomic_write(_OUT.value, measured.to_json())
  if _JSON.value:
    sys.stdout.write(json.dumps({"benchmark": bench.to_dict(),
                                 "cluster": measured.to_dict()}) + "\n")
    return
  sys.stdout.write(bench.describe() + "\n")
  for path in filter(None, [_OUT.value, None if _SPEC.value else _STATE.value]):
    sys.stdout.write(f"measured cluster written to {path}\n")


def main(argv: List[str]) -> None:
  """Runs `tfplace cluster up|down|status|benchmark`; see the module
  docstring."""
  actions = {"up": _up, "down": _down, "status": _status,
             "benchmark": _benchmark}
  if len(argv) != 2 or argv[1] not in actions:
    raise TfplaceError("expected one action: tfplace cluster "
                       "up|down|status|benchmark")
  actions[argv[1]]()
