"""How long a message waits behind a busy worker (issue 13).

Starts a 2-worker local TF server cluster (one core each) and, for every
--busy_ops count, times a scalar sent from task 0 to task 1 while the sender
(--busy_sides sender) or the receiver (receiver) runs a chain of that many
ops (--kinds: scalar adds, 128 x 128 matmuls); 0 ops: both idle;
waiting_sender: the sender's chain, with the sender idle before its
producer (it waits for a scalar from the receiver). Prints one
row per case: how long the chain ran, and the median, 10th and 90th
percentile of the delay from the producer's end to the consumer's start
(traced steps; `tfplace.measurement.send_delay`). --json: the last line is a
JSON object. Run it alone on the machine.
"""

import dataclasses
import json
import sys

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.cli.app_runner import run_app, start_script

start_script("send_delay")  # Ctrl-C, TF's start-up lines: from here.

from absl import flags


_BUSY_OPS = flags.DEFINE_list("busy_ops", ["0", "500", "3000"],
                              "ops in the busy chain, one case each")
_KINDS = flags.DEFINE_list("kinds", ["add"], "chain ops: add, matmul")
_SIDES = flags.DEFINE_list("busy_sides", ["sender"],
                           "which worker runs the chain: sender, receiver, "
                           "waiting_sender")
_STEPS = flags.DEFINE_integer("steps", 30, "traced steps per case")
_JSON = flags.DEFINE_bool("json", False, "end with a JSON line")


def main(argv):
  del argv
  from tfplace.errors import MeasureError
  from tfplace.measurement.config import MeasureConfig
  from tfplace.measurement.local_cluster import LocalCluster, worker_device
  from tfplace.measurement.send_delay import (BUSY_SIDES, CHAIN_KINDS,
                                              measure_send_delay)
  try:
    counts = [int(n) for n in _BUSY_OPS.value]
  except ValueError:
    counts = [-1]
  if min(counts) < 0:
    raise MeasureError(f"--busy_ops must be whole numbers >= 0, got "
                       f"{_BUSY_OPS.value}")
  for flag, given, allowed in (("--kinds", _KINDS.value, CHAIN_KINDS),
                               ("--busy_sides", _SIDES.value, BUSY_SIDES)):
    if not given or set(given) - set(allowed):
      raise MeasureError(f"{flag} takes {', '.join(allowed)}; got "
                         f"{given}")
  rows = []
  with LocalCluster(num_workers=2) as lc:
    config = MeasureConfig(target=lc.target, steps=_STEPS.value, warmup=5)
    for side in _SIDES.value:
      for kind in _KINDS.value:
        for count in counts:
          rows.append(measure_send_delay(worker_device(0), worker_device(1),
                                         side, kind, count, config))
  print("| busy side | chain | ops | busy ms | delay ms, median | p10 | p90 |"
        "\n|---|---|---:|---:|---:|---:|---:|")
  for r in rows:
    print(f"| {r.busy_side} | {r.kind} | {r.busy_ops} | {r.busy_s * 1e3:.2f} "
          f"| {r.delay_s * 1e3:.2f} | {r.delay_p10_s * 1e3:.2f} | "
          f"{r.delay_p90_s * 1e3:.2f} |")
  if _JSON.value:
    print(json.dumps([dataclasses.asdict(r) for r in rows]))


if __name__ == "__main__":
  run_app(main, sys.argv, "send_delay")
