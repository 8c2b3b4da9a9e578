"""What one message adds to a step, measured and simulated (issue 13).

Starts a 2-worker local TF server cluster (one core each) and, for every
--contexts entry, times steps that send --few and --many scalars from task
0 to task 1 while the workers are idle, one of them or both run a chain of
--chain_ops matmuls, the sender sends one scalar every few matmuls of its
chain, both send to each other, or chains of adds cross between them at
every op (`tfplace.measurement.message_cost`). Prints one row per context: the
measured seconds per message, the simulator's for the same graphs, and
their ratio. The simulator uses --calibration (a calibration of these two
workers, e.g. `scripts/fidelity.py --cross --calibration_out DIR`), or else
the cluster benchmark and the Recv issue cost measured here first (the
benchmark's ping-pong hop and fan-out per message are printed too). --json: the last line is a JSON object. Run it
alone on the machine.
"""

import json
import sys

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.cli.app_runner import run_app, start_script

start_script("message_cost")  # Ctrl-C, TF's start-up lines: from here.

from absl import flags


_CONTEXTS = flags.DEFINE_list(
    "contexts", ["idle", "sender_busy", "receiver_busy", "both_busy",
                 "scattered", "two_way", "crossing"],
    "what the workers do besides the messages")
_FEW = flags.DEFINE_integer("few", 8, "scalars in the smaller step")
_MANY = flags.DEFINE_integer("many", 40, "scalars in the larger step")
_CHAIN_OPS = flags.DEFINE_integer("chain_ops", 200,
                                  "128 x 128 matmuls in a busy chain")
_BYTES = flags.DEFINE_integer("message_bytes", 4, "bytes per message (4: a "
                              "scalar; else a float32 vector)")
_STEPS = flags.DEFINE_integer("steps", 10, "timed runs (x 2 x 3 pairs)")
_CALIBRATION = flags.DEFINE_string(
    "calibration", None, "calibration JSON of the two workers (default: "
    "run the cluster benchmark)")
_JSON = flags.DEFINE_bool("json", False, "end with a JSON line")


def main(argv):
  del argv
  from tfplace.cost.calibrated import Calibration, check_calibration_matches
  from tfplace.errors import MeasureError
  from tfplace.measurement.calibration_fit import calibration_from_benchmark
  from tfplace.measurement.config import MeasureConfig
  from tfplace.measurement.local_cluster import (LocalCluster,
                                                 make_worker_cluster,
                                                 worker_device)
  from tfplace.measurement.message_cost import (
      CONTEXTS, MessageCostConfig, check_sizes, measure_message_costs,
      predicted_message_costs)
  from tfplace.measurement.recv_issue import with_recv_issue
  if not _CONTEXTS.value or set(_CONTEXTS.value) - set(CONTEXTS):
    raise MeasureError(f"--contexts takes {', '.join(CONTEXTS)}; got "
                       f"{_CONTEXTS.value}")
  if _STEPS.value < 1:
    raise MeasureError(f"--steps must be >= 1, got {_STEPS.value}")
  try:
    sizes = MessageCostConfig(_FEW.value, _MANY.value, _CHAIN_OPS.value,
                              _BYTES.value)
    check_sizes(_CONTEXTS.value, sizes)
  except MeasureError as e:
    raise MeasureError(f"--few, --many, --chain_ops, --message_bytes: {e}"
                       ) from None
  cluster = make_worker_cluster(2)
  calibration = None
  if _CALIBRATION.value:
    calibration = Calibration.load(_CALIBRATION.value)
    check_calibration_matches(calibration, cluster)
  sender, receiver = worker_device(0), worker_device(1)
  with LocalCluster(num_workers=2) as lc:
    config = MeasureConfig(target=lc.target, steps=_STEPS.value, warmup=3)
    if calibration is None:
      bench = lc.benchmark(config, progress=True)
      link = next(l for l in bench.links
                  if (l.src, l.dst) == (sender, receiver))
      print(f"cluster benchmark, task 0 -> task 1: fan-out "
            f"{link.message_overhead_s * 1e6:.1f} us per message, ping-pong "
            f"{link.hop_s * 1e6:.1f} us per hop\n")
      # The idle benchmarks' figures as they are (the shares
      # `calibration_fit.fit_transfer_figures` keeps on these rendezvous
      # clusters, without the extra latency it fits on a suite's split
      # runs), and the Recv issue cost `tfplace calibrate` measures.
      bench = with_recv_issue(bench, lc.to_cluster(), config)
      calibration = calibration_from_benchmark(
          bench.with_message_share(1.0, 0.0), cluster)
    measured = measure_message_costs(sender, receiver, _CONTEXTS.value,
                                     sizes, config)
  predicted = predicted_message_costs(cluster, calibration, sender,
                                      receiver, _CONTEXTS.value, sizes)
  print(f"| context | measured us / message | simulated | simulated / "
        f"measured |\n|---|---:|---:|---:|")
  for context in _CONTEXTS.value:
    m, p = measured[context], predicted[context]
    ratio = f"{p / m:.2f}" if m > 0 else "-"
    print(f"| {context} | {m * 1e6:.1f} | {p * 1e6:.1f} | {ratio} |")
  if _JSON.value:
    print(json.dumps({"measured_s": measured, "simulated_s": predicted,
                      "few": sizes.few, "many": sizes.many,
                      "chain_ops": sizes.chain_ops,
                      "message_bytes": sizes.message_bytes}))


if __name__ == "__main__":
  run_app(main, sys.argv, "message_cost")
