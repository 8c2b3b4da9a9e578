"""Does the simulator send what TensorFlow sends? (issue 13)

Starts a 2-worker local TF server cluster (one core each) and runs one
training step of every split placement of a cross record's judged graphs
(`scripts/fidelity.py --cross --record`; default: the newest in
testdata/cross_records) with `RunOptions.output_partition_graphs`; counts
the tensors TF sent between the workers (`_Send`/`_HostSend`, control
edges' dummies and the fetched loss's way to task 0 included) and the
simulator's transfers for the same placement. Prints per graph the
placements whose counts match exactly, both totals, and the count one
message per tensor and remote consumer device would give (data only).
--json: the last line is a JSON object. Takes about a minute; timing does
not matter here.
"""

import glob
import json
import os
import sys

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.cli.app_runner import run_app, start_script

start_script("message_count")  # Ctrl-C, TF's start-up lines: from here.

from absl import flags

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_RECORD = flags.DEFINE_string(
    "record", None, "a cross record (.json or .json.gz; default: the newest "
    "in testdata/cross_records)")
_GRAPHS = flags.DEFINE_list("graphs", [], "judged graphs to check (default: "
                            "every one in the record)")
_JSON = flags.DEFINE_bool("json", False, "end with a JSON line")


def _newest_record() -> str:
  paths = sorted(glob.glob(os.path.join(_ROOT, "testdata", "cross_records",
                                        "*.json.gz")))
  if not paths:
    from tfplace.errors import MeasureError
    raise MeasureError("no cross record in testdata/cross_records: give "
                       "--record")
  return paths[-1]


def main(argv):
  del argv
  from tfplace.cost.analytical import AnalyticalCostModel
  from tfplace.errors import MeasureError
  from tfplace.experiments.cross_record import load_record
  from tfplace.experiments.fidelity import cross_transfers
  from tfplace.measurement.config import MeasureConfig
  from tfplace.measurement.local_cluster import (LocalCluster,
                                                 make_worker_cluster)
  from tfplace.measurement.partition_messages import step_messages
  from tfplace.simulator.simulator import Simulator
  try:
    record = load_record(_RECORD.value or _newest_record())
  except MeasureError as e:
    raise MeasureError(f"--record: {e}") from None
  judged = [j.runs for j in record.judged
            if not _GRAPHS.value or j.runs.graph.name in _GRAPHS.value]
  missing = set(_GRAPHS.value) - {r.graph.name for r in judged}
  if missing:
    raise MeasureError(f"--graphs: not in the record: {sorted(missing)}")
  if make_worker_cluster(2).device_names != record.cluster.device_names:
    raise MeasureError("--record: its cluster is not two one-core TF "
                       "server workers, the cluster this script starts; "
                       "give a record of `scripts/fidelity.py --cross "
                       "--record F` (its default cluster)")
  rows = []
  with LocalCluster(num_workers=2) as lc:
    cluster, config = lc.to_cluster(), MeasureConfig(target=lc.target)
    for runs in judged:
      graph = runs.graph
      simulator = Simulator(graph, cluster,
                            AnalyticalCostModel().op_costs(graph, cluster))
      for label, placement in runs.placements:
        ids = placement.to_array(graph, cluster)
        if len(set(ids[graph.step_mask].tolist())) < 2:
          continue
        sent = len(step_messages(graph, placement, config))
        simulated = simulator.simulate(ids).num_transfers
        rows.append(dict(graph=graph.name, placement=label, tf=sent,
                         simulator=simulated,
                         per_tensor=cross_transfers(graph, ids)))
        print(f"{graph.name} {label}: TF {sent}, simulator {simulated}",
              flush=True)
  print("\n| graph | placements | same count | TF messages | simulator | "
        "data tensors, one message per remote device |\n"
        "|---|---:|---:|---:|---:|---:|")
  for name in dict.fromkeys(r["graph"] for r in rows):
    mine = [r for r in rows if r["graph"] == name]
    print(f"| {name} | {len(mine)} | "
          f"{sum(r['tf'] == r['simulator'] for r in mine)} | "
          f"{sum(r['tf'] for r in mine)} | "
          f"{sum(r['simulator'] for r in mine)} | "
          f"{sum(r['per_tensor'] for r in mine)} |")
  same = sum(r["tf"] == r["simulator"] for r in rows)
  print(f"\nsame count on {same} of {len(rows)} split placements")
  if _JSON.value:
    print(json.dumps(rows))


if __name__ == "__main__":
  run_app(main, sys.argv, "message_count")
