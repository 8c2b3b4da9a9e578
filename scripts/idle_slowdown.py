"""How much slower ops run in two-worker steps than alone, by the idle gap
before them (issue 13), read from recorded cross runs (no cluster).

For each record (default: every shipped one in testdata/cross_records/),
each op of a multi-device run is paired with the same op in a one-device
run of the same graph, and bucketed by how long its worker had no op
before it (< 20 us, 20-100 us, >= 100 us): the median ratio of the two
durations and the median and mean difference. --suite reads the
calibration suite's runs (on_i against halves / random) instead of the
judged graphs' (single_cpu against the nine split placements). --json: the
last line is a JSON list of the rows.
"""

import dataclasses
import glob
import json
import os
import sys

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.cli.app_runner import run_app, start_script

start_script("idle_slowdown")  # Ctrl-C, TF's start-up lines: from here.

from absl import flags


_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_RECORDS = flags.DEFINE_list(
    "records", None, "cross records (.json.gz) to read; default: "
    "testdata/cross_records/*.json.gz")
_SUITE = flags.DEFINE_bool("suite", False, "read the calibration suite's "
                           "runs instead of the judged graphs'")
_MIN_BASE_US = flags.DEFINE_float("min_base_us", 5.0, "leave out ops under "
                                  "this many us alone (timer resolution)")
_JSON = flags.DEFINE_bool("json", False, "end with a JSON line")


def main(argv):
  del argv
  from tfplace.experiments import cross_record
  from tfplace.experiments.idle_slowdown import slowdown_table
  paths = _RECORDS.value or sorted(glob.glob(os.path.join(
      _ROOT, "testdata", "cross_records", "*.json.gz")))
  runs = []
  for path in paths:
    record = cross_record.load_record(path)
    runs += (list(record.suite) if _SUITE.value
             else [j.runs for j in record.judged])
  rows = slowdown_table(runs, _MIN_BASE_US.value * 1e-6)
  print(f"{len(paths)} record(s), {'suite' if _SUITE.value else 'judged'} "
        "graphs: multi-device op / the same op alone, by the idle gap "
        "before it on its worker\n")
  print("| graph | idle gap | ops | median ratio | median excess us | "
        "mean excess us |\n|---|---|---:|---:|---:|---:|")
  for r in rows:
    print(f"| {r.graph} | {r.bucket} | {r.num_ops} | {r.median_ratio:.2f} | "
          f"{r.median_excess_s * 1e6:.1f} | {r.mean_excess_s * 1e6:.1f} |")
  if _JSON.value:
    print(json.dumps([dataclasses.asdict(r) for r in rows]))


if __name__ == "__main__":
  run_app(main, sys.argv, "idle_slowdown")
