"""Transfer times between two devices and the latency + bandwidth fit.

By default starts a 2-worker local TF server cluster and times tensors sent
from task 0 to task 1 (baseline: the same graph on task 0 alone). With
--in_process it times two logical CPU devices of this process instead.
Prints one row per size and the fitted latency and bandwidth (--json: the
last line is a JSON object).
"""

import json
import sys

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.cli.app_runner import run_app, start_script

start_script("comm_benchmark")  # Ctrl-C, TF's start-up lines: from here.

from absl import flags


_SIZES = flags.DEFINE_list("sizes", ["4096", "65536", "524288", "2097152",
                                     "8388608"], "tensor sizes in bytes")
_REPEATS = flags.DEFINE_integer("repeats", 10, "timed runs per size")
_IN_PROCESS = flags.DEFINE_bool("in_process", False,
                                "two logical CPUs instead of two servers")
_JSON = flags.DEFINE_bool("json", False, "end with a JSON line")


def main(argv):
  del argv
  from tfplace.measurement import comm_benchmark
  from tfplace.measurement.config import MeasureConfig
  from tfplace.measurement.local_cluster import LocalCluster, worker_device
  sizes = [int(s) for s in _SIZES.value]
  if _IN_PROCESS.value:
    samples = comm_benchmark.benchmark_transfers(
        "/job:localhost/replica:0/task:0/device:CPU:0",
        "/job:localhost/replica:0/task:0/device:CPU:1", sizes=sizes,
        config=MeasureConfig(steps=_REPEATS.value))
  else:
    with LocalCluster(num_workers=2) as lc:
      samples = comm_benchmark.benchmark_transfers(
          worker_device(0), worker_device(1), sizes=sizes,
          config=MeasureConfig(target=lc.target, steps=_REPEATS.value))
  print("| bytes | transfer ms |\n|---:|---:|")
  for s in samples:
    print(f"| {s.nbytes} | {s.seconds * 1e3:.3f} |")
  fit = comm_benchmark.fit_link(samples)
  print(f"\nfit: latency {fit.latency_s * 1e6:.1f} us, bandwidth "
        f"{fit.bandwidth / 1e9:.3f} GB/s, R^2 {fit.r2:.3f}")
  if _JSON.value:
    print(json.dumps({"latency_s": fit.latency_s, "bandwidth": fit.bandwidth,
                      "r2": fit.r2}))


if __name__ == "__main__":
  run_app(main, sys.argv, "comm_benchmark")
