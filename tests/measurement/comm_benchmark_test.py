"""Tests for tfplace.measurement.comm_benchmark's transfer graphs and runs
(the link fit: calibration_fit_test)."""

import math

import pytest

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.measurement import comm_benchmark
from tfplace.measurement.config import MeasureConfig

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
CPU1 = "/job:localhost/replica:0/task:0/device:CPU:1"


@pytest.mark.parametrize("read, op_type", [(False, "StridedSlice"),
                                           (True, "Sum")])
def test_the_consumer_takes_one_element_or_reads_the_tensor(read, op_type):
  graph, fetched = comm_benchmark._transfer_graph(4096, CPU0, CPU1, read)
  assert fetched.op.type == op_type
  assert fetched.op.device == CPU1
  payload = fetched.op.inputs[0]
  assert payload.op.device == CPU0
  assert payload.shape.as_list() == [1024]
  assert fetched.shape.as_list() == ([] if read else [1])


@pytest.mark.parametrize("read", [False, True])
def test_transfers_between_two_logical_cpus_give_one_sample_per_size(read):
  samples = comm_benchmark.benchmark_transfers(
      CPU0, CPU1, sizes=(4096, 65536),
      config=MeasureConfig(steps=2, warmup=1), read=read)
  assert [s.nbytes for s in samples] == [4096, 65536]
  assert all(math.isfinite(s.seconds) and s.seconds >= 0 for s in samples)
