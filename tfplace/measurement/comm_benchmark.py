"""Transfer times between two devices, and a latency + bandwidth fit.

A tensor of n bytes is produced on `src` and consumed on `dst`; the same
graph with the consumer on `src` is the baseline. The difference of their
median step times is the transfer time of n bytes. A least-squares fit of
time = latency + n / bandwidth over several sizes gives the link figures
the simulator uses (`Calibration.links`).

The consumer takes one element (`strided_slice`, as the cluster
benchmark's does: `cluster_benchmark`), or with `read` sums the whole
tensor, as real ops read what they receive. The time per byte is not one
rate. On this project's 2-worker local cluster (one core each,
2026-11-29, twenty-first session; `scripts/comm_benchmark.py --sizes
4096,...,8388608 --knee_bytes 2097152 --repeats 20`, two runs per
consumer) tensors of up to 2 MB moved at 3.7-4.9 GB/s (read) and 4.1-4.6
GB/s (slice), the bytes from 2 MB to 8 MB at 1.6-2.1 and 1.5-2.0 GB/s:
two regimes with a knee at ~2 MB, with either consumer. The cluster
benchmark's one slope over 4 KB, 2 MB and 8 MB (1.6-2.4 GB/s) sits
between them. As the simulator's rate the faster one did not help: the
calibration's fit then charged each message of the suite's split runs
60-90 us more, and the judged graphs replayed worse (WORKSPACE_NOTES.md,
issue 13).
"""

import dataclasses
import statistics
import time
from typing import List, Optional, Sequence

import numpy as np

from tfplace.errors import MeasureError
from tfplace.measurement.config import MeasureConfig
from tfplace.measurement.session import first_line, session_config

DEFAULT_SIZES = (4 << 10, 64 << 10, 512 << 10, 2 << 20, 8 << 20)


@dataclasses.dataclass(frozen=True)
class CommSample:
  """Seconds to move `nbytes` from one device to another."""
  nbytes: int
  seconds: float


@dataclasses.dataclass(frozen=True)
class LinkFit:
  """time = latency_s + nbytes / bandwidth, fitted by least squares.

  Attributes:
    latency_s: fixed cost per transfer (>= 0).
    bandwidth: bytes per second.
    r2: coefficient of determination of the fit.
    num_points: samples used.
  """
  latency_s: float
  bandwidth: float
  r2: float
  num_points: int

  def transfer_time(self, nbytes: float) -> float:
    return self.latency_s + nbytes / self.bandwidth


def fit_link(samples: Sequence[CommSample]) -> LinkFit:
  """Fits latency and bandwidth to (bytes, seconds) samples.

  Raises:
    MeasureError: fewer than two distinct sizes, or time does not grow with
      size (no positive bandwidth fits).
  """
  n = np.array([s.nbytes for s in samples], dtype=np.float64)
  t = np.array([s.seconds for s in samples], dtype=np.float64)
  if len(np.unique(n)) < 2:
    raise MeasureError("a link fit needs samples of at least two sizes")
  a = np.stack([np.ones_like(n), n], axis=1)
  (latency, per_byte), *_ = np.linalg.lstsq(a, t, rcond=None)
  if per_byte <= 0:
    raise MeasureError("transfer time does not grow with size; no bandwidth "
                       "can be fitted (too much noise: use larger sizes)")
  if latency < 0:  # Refit through the origin: latency cannot be negative.
    latency, per_byte = 0.0, float(n @ t / (n @ n))
  pred = latency + per_byte * n
  ss_tot = float(((t - t.mean()) ** 2).sum())
  r2 = 1.0 - float(((t - pred) ** 2).sum()) / ss_tot if ss_tot > 0 else 1.0
  return LinkFit(latency_s=float(latency), bandwidth=float(1.0 / per_byte),
                 r2=r2, num_points=len(samples))


def _transfer_graph(nbytes: int, producer: str, consumer: str,
                    read: bool = False):
  import tensorflow as tf
  graph = tf.Graph()
  with graph.as_default():
    with tf.device(producer):
      x = tf.fill([max(1, nbytes // 4)], tf.constant(1.0), name="payload")
    with tf.device(consumer):
      y = (tf.reduce_sum(x, name="read") if read else
           tf.strided_slice(x, [0], [1], name="take"))
  return graph, y


def _median_run(nbytes: int, producer: str, consumer: str,
                config: MeasureConfig, num_cpu_devices: int,
                read: bool) -> float:
  import tensorflow as tf
  graph, y = _transfer_graph(nbytes, producer, consumer, read)
  session_cfg = session_config(num_cpu_devices, remote=config.remote,
                               timeout_s=config.step_timeout_s)
  options = tf.compat.v1.RunOptions(
      timeout_in_ms=int(config.step_timeout_s * 1000))
  try:
    with tf.compat.v1.Session(config.target, graph=graph,
                              config=session_cfg) as sess:
      for _ in range(config.warmup):
        sess.run(y, options=options)
      times = []
      for _ in range(config.steps):
        start = time.perf_counter()
        sess.run(y, options=options)
        times.append(time.perf_counter() - start)
  except tf.errors.OpError as e:
    raise MeasureError(f"transfer benchmark failed: {type(e).__name__}: "
                       f"{first_line(e)}") from None
  return statistics.median(times)


def benchmark_transfers(src: str, dst: str, *,
                        sizes: Sequence[int] = DEFAULT_SIZES,
                        config: Optional[MeasureConfig] = None,
                        num_cpu_devices: int = 2,
                        read: bool = False) -> List[CommSample]:
  """Measures transfer time src -> dst for each size (baseline subtracted).

  Args:
    src: producing device, e.g. "/job:worker/replica:0/task:0/device:CPU:0".
    dst: consuming device.
    sizes: tensor sizes in bytes.
    config: the session target ("" in process), untimed runs (`warmup`) and
      timed runs (`steps`, the median is used) per size and configuration,
      and the deadline of each run (`step_timeout_s`).
    num_cpu_devices: logical CPUs of an in-process session.
    read: the consumer sums the whole tensor (else it takes one element).

  Returns:
    One `CommSample` per size (seconds clipped at 0).
  """
  config = config or MeasureConfig()
  out = []
  for nbytes in sizes:
    split = _median_run(nbytes, src, dst, config, num_cpu_devices, read)
    local = _median_run(nbytes, src, src, config, num_cpu_devices, read)
    out.append(CommSample(nbytes=int(nbytes), seconds=max(0.0, split - local)))
  return out
