"""Transfer times between two devices and the latency + bandwidth fit.

By default starts a 2-worker local TF server cluster and times tensors sent
from task 0 to task 1 (baseline: the same graph on task 0 alone). With
--in_process it times two logical CPU devices of this process instead.
Prints one row per size and the fitted latency and bandwidth (--json: the
last line is a JSON object). --consumer read: each tensor's consumer sums
it all (as real ops read what they receive) instead of taking one element
(the cluster benchmark's consumer); --knee_bytes K: also one fit over the
sizes up to K and one over the sizes from K (the time per byte is not
one rate: `tfplace.measurement.comm_benchmark`).
"""

import json
import sys

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.cli.app_runner import run_app, start_script

start_script("comm_benchmark")  # Ctrl-C, TF's start-up lines: from here.

from absl import flags


_SIZES = flags.DEFINE_list("sizes", ["4096", "65536", "524288", "2097152",
                                     "8388608"], "tensor sizes in bytes")
_CONSUMER = flags.DEFINE_enum(
    "consumer", "slice", ["slice", "read"],
    "slice: the consumer takes one element (the cluster benchmark's); "
    "read: it sums the whole tensor")
_KNEE = flags.DEFINE_integer(
    "knee_bytes", 0, "> 0: also fit the sizes up to it and from it apart")
_REPEATS = flags.DEFINE_integer("repeats", 10, "timed runs per size")
_IN_PROCESS = flags.DEFINE_bool("in_process", False,
                                "two logical CPUs instead of two servers")
_JSON = flags.DEFINE_bool("json", False, "end with a JSON line")


def main(argv):
  del argv
  from tfplace.measurement import comm_benchmark
  from tfplace.measurement.config import MeasureConfig
  from tfplace.measurement.local_cluster import LocalCluster, worker_device
  from tfplace.errors import MeasureError
  try:
    sizes = [int(s) for s in _SIZES.value]
  except ValueError:
    raise MeasureError(f"--sizes takes whole byte counts; got "
                       f"{_SIZES.value}") from None
  if len(set(sizes)) < 2 or min(sizes) < 4:
    raise MeasureError(f"--sizes: give two or more distinct sizes of at "
                       f"least 4 bytes (one float32); got {sizes}")
  ranges = {"all": (0, float("inf"))}
  if _KNEE.value > 0:
    ranges.update({f"<= {_KNEE.value}": (0, _KNEE.value),
                   f">= {_KNEE.value}": (_KNEE.value, float("inf"))})
    if any(sum(lo <= n <= hi for n in set(sizes)) < 2
           for lo, hi in ranges.values()):
      raise MeasureError(f"--knee_bytes {_KNEE.value}: give two or more "
                         "--sizes on each side of it (the knee may be one)")
  elif _KNEE.value < 0:
    raise MeasureError(f"--knee_bytes must be >= 0, got {_KNEE.value}")
  read = _CONSUMER.value == "read"
  if _IN_PROCESS.value:
    samples = comm_benchmark.benchmark_transfers(
        "/job:localhost/replica:0/task:0/device:CPU:0",
        "/job:localhost/replica:0/task:0/device:CPU:1", sizes=sizes,
        config=MeasureConfig(steps=_REPEATS.value), read=read)
  else:
    with LocalCluster(num_workers=2) as lc:
      samples = comm_benchmark.benchmark_transfers(
          worker_device(0), worker_device(1), sizes=sizes,
          config=MeasureConfig(target=lc.target, steps=_REPEATS.value),
          read=read)
  print("| bytes | transfer ms |\n|---:|---:|")
  for s in samples:
    print(f"| {s.nbytes} | {s.seconds * 1e3:.3f} |")
  fits = {}
  print()
  for label, (lo, hi) in ranges.items():
    fit = comm_benchmark.fit_link([s for s in samples if lo <= s.nbytes <= hi])
    fits[label] = {"latency_s": fit.latency_s, "bandwidth": fit.bandwidth,
                   "r2": fit.r2}
    print(f"fit over {label} bytes: latency {fit.latency_s * 1e6:.1f} us, "
          f"bandwidth {fit.bandwidth / 1e9:.3f} GB/s, R^2 {fit.r2:.3f}")
  if _JSON.value:
    print(json.dumps(dict(fits["all"], consumer=_CONSUMER.value,
                          fits=fits)))


if __name__ == "__main__":
  run_app(main, sys.argv, "comm_benchmark")
