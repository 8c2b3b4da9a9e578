"""Tests for tfplace.measurement.runner: in-process timed steps and op records."""

import dataclasses
import os
import time

import pytest

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.errors import MeasureError
from tfplace.measurement import runner, timing
from tfplace.measurement.config import MeasureConfig
from tfplace.models.registry import build_model
from tfplace.placement import Placement

CPU = "/job:localhost/replica:0/task:0/device:CPU:%d"


@pytest.fixture(scope="module")
def graph():
  return build_model("mlp_towers", num_towers=2, hidden=8, batch_size=4,
                     input_size=8, num_layers=1)


def _two_cpu_placement(graph):
  """Colocation group g on CPU:(g % 2)."""
  return Placement({op.name: CPU % (int(graph.group_of[i]) % 2)
                    for i, op in enumerate(graph.ops)})


def test_timing_statistics_by_hand():
  t = timing.timing_from_steps([0.4, 0.1, 0.3, 0.2])
  assert t.median_step_time_s == pytest.approx(0.25)
  assert t.min_step_time_s == pytest.approx(0.1)
  assert t.max_step_time_s == pytest.approx(0.4)
  # Percentiles 25/75 of 0.1..0.4 (linear): 0.175 and 0.325.
  assert t.iqr_s == pytest.approx(0.15)
  assert t.step_times_s == (0.4, 0.1, 0.3, 0.2)
  back = timing.StepTiming.from_dict(t.to_dict())
  assert back == t


def test_measure_two_logical_cpus(graph, tmp_path):
  placement = _two_cpu_placement(graph)
  result = runner.measure(graph, placement, MeasureConfig(warmup=1, steps=3),
                          trace_dir=str(tmp_path))
  assert len(result.step_times_s) == 3
  assert all(t > 0 for t in result.step_times_s)
  assert result.min_step_time_s <= result.median_step_time_s
  assert result.devices_match, result.mismatches[:3]
  assert result.loss is not None and result.loss > 0
  devices = {r.device for r in result.op_records}
  assert devices == {CPU % 0, CPU % 1}
  by_name = {r.name: r for r in result.op_records}
  assert "train_op" in by_name or len(by_name) > graph.num_ops // 2
  for name, rec in by_name.items():
    assert rec.device == placement.devices[name]
    assert rec.start_s >= 0 and rec.duration_s >= 0
  assert os.path.getsize(tmp_path / "step_stats.pb") > 0
  assert any(f.endswith(".xplane.pb") for _, _, files in os.walk(tmp_path)
             for f in files)


GPU = "/job:localhost/replica:0/task:0/device:GPU:0"


def _h200_step_stats():
  """step_stats of small_cnn on an H200 (scripts/gpu_steps.py --trace_dir)."""
  from tensorflow.core.framework import step_stats_pb2
  stats = step_stats_pb2.StepStats()
  with open(os.path.join(os.path.dirname(__file__), "..", "..", "testdata",
                         "h200_small_cnn_step_stats.pb"), "rb") as f:
    stats.ParseFromString(f.read())
  return stats


def test_a_gpu_op_is_one_record_the_longer_of_its_launch_and_kernels():
  from tensorflow.core.framework import step_stats_pb2
  stats = step_stats_pb2.StepStats()
  launches = stats.dev_stats.add(device=GPU)
  kernels = stats.dev_stats.add(device="/device:GPU:0/stream:all")
  stream = stats.dev_stats.add(device="/device:GPU:0/stream:13")
  host = stats.dev_stats.add(device=CPU % 0)
  # conv: 40 us launch, kernels of 60 + 30 us; add: 12 us launch, 2 us
  # kernel. stream:13 repeats stream:all's kernels.
  for dev, name, start, dur in [(launches, "conv", 100, 40),
                                (launches, "add", 150, 12),
                                (kernels, "conv:Conv2D", 130, 60),
                                (kernels, "conv:Conv2D", 195, 30),
                                (kernels, "add:AddV2", 225, 2),
                                (stream, "conv:Conv2D", 130, 60),
                                (host, "ids", 90, 5)]:
    dev.node_stats.add(node_name=name, all_start_micros=start,
                       all_end_rel_micros=dur)
  got = {(r.name, r.device): (round(r.start_s * 1e6), round(r.duration_s * 1e6),
                              r.kernel_s and round(r.kernel_s * 1e6))
         for r in timing.op_records(stats)}
  assert got == {("ids", CPU % 0): (0, 5, None), ("conv", GPU): (40, 90, 90),
                 ("add", GPU): (60, 12, 2)}
  # Files written before kept both records: they merge on load.
  kept = [timing.OpRecord("conv", GPU, 0.0, 40e-6),
          timing.OpRecord("conv", "/device:GPU:0", 30e-6, 90e-6)]
  loaded = timing.StepTiming.from_dict(dict(
      timing.timing_from_steps([1.0]).to_dict(),
      op_records=[dataclasses.asdict(r) for r in kept]))
  assert loaded.op_records == (
      timing.OpRecord("conv", GPU, 30e-6, 90e-6, kernel_s=90e-6),)


def test_a_real_gpu_step_gives_each_op_its_summed_kernels():
  stats = _h200_step_stats()
  by_op = {}
  for dev in stats.dev_stats:
    if dev.device.endswith("/stream:all"):
      for n in dev.node_stats:
        name = n.node_name.split(":")[0]
        by_op[name] = by_op.get(name, 0) + n.all_end_rel_micros * 1e-6
  records = timing.op_records(stats)
  assert {r.device for r in records} <= {GPU, CPU % 0}
  assert len({(r.name, r.device) for r in records}) == len(records)
  kernel = {r.name: r.kernel_s for r in records if r.kernel_s is not None}
  assert kernel == pytest.approx(by_op)
  # One entry per op that ran kernels; a convolution sums several.
  assert len(kernel) > 30
  assert kernel["conv_0/Conv2D"] > max(
      n.all_end_rel_micros for dev in stats.dev_stats
      if dev.device.endswith("/stream:all") for n in dev.node_stats
      if n.node_name.startswith("conv_0/Conv2D:")) * 1e-6
  assert all(r.duration_s >= r.kernel_s for r in records if r.kernel_s)


def test_peak_memory_reads_each_devices_own_allocator():
  from tensorflow.core.framework import step_stats_pb2
  stats = step_stats_pb2.StepStats()
  cpu = stats.dev_stats.add(device=CPU % 0)
  gpu = stats.dev_stats.add(device=GPU)
  stream = stats.dev_stats.add(device="/device:GPU:0/stream:all")
  for dev, allocator, in_use in [(cpu, "cpu", 300), (cpu, "cpu", 700),
                                 (cpu, "cpu", 500), (gpu, "GPU_0_bfc", 4000),
                                 (gpu, "gpu_host_bfc", 9000),
                                 (stream, "GPU_0_bfc", 99999)]:
    node = dev.node_stats.add(node_name="op")
    node.memory.add(allocator_name=allocator, allocator_bytes_in_use=in_use)
  assert timing.peak_memory(stats) == {CPU % 0: 700, GPU: 4000}
  # Scratch an op freed before its last allocation: in use before it
  # (600 - 100) plus its own peak (5000), above every snapshot.
  node = cpu.node_stats.add(node_name="filter_grad")
  node.memory.add(allocator_name="cpu", allocator_bytes_in_use=600,
                  live_bytes=100, peak_bytes=5000)
  assert timing.peak_memory(stats) == {CPU % 0: 5500, GPU: 4000}
  # An allocator without statistics reports 0: no peak rather than 0 bytes.
  quiet = step_stats_pb2.StepStats()
  quiet.dev_stats.add(device=CPU % 0).node_stats.add(
      node_name="op").memory.add(allocator_name="cpu", total_bytes=64)
  assert timing.peak_memory(quiet) == {}


def test_a_placed_device_without_a_peak_says_why():
  from tensorflow.core.framework import step_stats_pb2
  stats = step_stats_pb2.StepStats()
  w = "/job:worker/replica:0/task:%d/device:CPU:0"
  busy = stats.dev_stats.add(device=w % 0).node_stats.add(node_name="mm")
  busy.memory.add(allocator_name="cpu", allocator_bytes_in_use=700)
  # Task 1 holds a variable and updates it in place: no snapshot.
  held = stats.dev_stats.add(device=w % 1)
  held.node_stats.add(node_name="_SOURCE")
  held.node_stats.add(node_name="v")
  held.node_stats.add(node_name="update_v/ResourceApplyGradientDescent")
  # Task 2's allocator kept no statistics; task 3 ran nothing of the step.
  stats.dev_stats.add(device=w % 2).node_stats.add(
      node_name="add").memory.add(allocator_name="cpu", total_bytes=64)
  peaks = timing.peak_memory(stats)
  assert peaks == {w % 0: 700}
  placed = [w % k for k in range(4)] + [CPU % 1, CPU % 0]
  assert timing.memory_unrecorded(stats, placed, peaks) == {
      w % 1: timing.NO_ALLOCATION, w % 2: timing.NO_STATISTICS,
      w % 3: timing.NOT_RUN, CPU % 0: timing.NOT_RUN, CPU % 1: timing.NOT_RUN}
  # A CPU sharing its task's allocator with a measured CPU is covered.
  assert timing.memory_unrecorded(
      stats, [CPU % 0, CPU % 1], {CPU % 0: 5}) == {}
  # Nothing measured anywhere: the caller says why once, not per device.
  assert timing.memory_unrecorded(stats, placed, {}) == {}


def _variables_and_the_rest(path):
  """A two-layer step exported as a TF1 user would, and a placement of its
  variables (with their reads and updates) on task 1, the rest on task 0."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from tfplace.graph.importers import import_graph  # pylint: disable=import-outside-toplevel
  from tfplace.measurement.local_cluster import worker_device  # pylint: disable=import-outside-toplevel
  g = tf.Graph()
  with g.as_default():
    x = tf.random.normal([8, 16], seed=1)
    w = tf.compat.v1.get_variable("w", [16, 16], use_resource=True)
    v = tf.compat.v1.get_variable("v", [16, 4], use_resource=True)
    y = tf.matmul(tf.nn.relu(tf.matmul(x, w)), v)
    loss = tf.reduce_sum(y * y, name="loss")
    tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.LOSSES, loss)
    tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, name="train_op")
    tf.compat.v1.global_variables_initializer()
    tf.compat.v1.train.export_meta_graph(filename=path)
  graph = import_graph(path)
  names = [op.name for op in graph.ops]
  held = {graph.group_of[names.index("w")], graph.group_of[names.index("v")]}
  return graph, Placement({n: worker_device(int(graph.group_of[i] in held))
                           for i, n in enumerate(names)})


def test_a_worker_holding_only_variables_is_listed_without_a_peak(tmp_path):
  # Its ops (variables, their reads, in-place updates) allocate nothing in
  # the step, so TF snapshots no allocator there: it had no entry at all.
  from tfplace.measurement.local_cluster import LocalCluster, worker_device  # pylint: disable=import-outside-toplevel
  graph, placement = _variables_and_the_rest(str(tmp_path / "step.meta"))
  with LocalCluster(num_workers=2) as servers:
    result = runner.measure(graph, placement, MeasureConfig(
        target=servers.target, warmup=1, steps=1, timeout_s=60))
  assert result.devices_match, result.mismatches[:3]
  assert set(result.peak_memory_bytes) == {worker_device(0)}
  assert result.memory_unrecorded == {worker_device(1): timing.NO_ALLOCATION}


def test_simulated_peak_memory_on_a_gpu_leaves_out_kernel_scratch():
  # small_cnn on one H200: the GPU allocator's peak, against the simulator's.
  from tfplace.cost.presets import load_cluster
  from tfplace.pipeline import place, simulate
  stats = _h200_step_stats()
  graph = build_model("small_cnn")
  assert {r.name for r in timing.op_records(stats)} <= set(graph.index)
  gpu_allocs = [(n.node_name, m) for d in stats.dev_stats
                for n in d.node_stats for m in n.memory
                if m.allocator_name == "GPU_0_bfc"]
  snapshots = max(m.allocator_bytes_in_use for _, m in gpu_allocs)
  # The peak is the first convolution's: its cuDNN workspace (peak_bytes)
  # on top of what was in use before it, above every snapshot.
  conv = next(m for name, m in gpu_allocs if name == "conv_0/Conv2D")
  measured = timing.peak_memory(stats)[GPU]
  assert measured == (conv.allocator_bytes_in_use - conv.live_bytes
                      + conv.peak_bytes) > snapshots
  cluster = load_cluster("h100x8_nvlink")
  simulated = simulate(graph, cluster,
                       place(graph, cluster, "single_gpu")).peak_memory_bytes
  # The simulator models no GPU scratch (cuDNN's workspace): within 10 % of
  # the tensors' peak (the snapshots; 97,040 B with the constants resident,
  # 83,216 B before, against 90,880), far under the scratch-inclusive one.
  assert simulated.max() == pytest.approx(snapshots, rel=0.1)
  assert simulated.max() < 0.7 * measured


def test_mismatch_detected():
  rec = timing.OpRecord("a", CPU % 1, 0.0, 1e-3)
  placement = Placement({"a": CPU % 0})
  out = timing.device_mismatches([rec], placement)
  assert out == [timing.DeviceMismatch("a", CPU % 0, CPU % 1)]


def test_remote_device_in_process_is_an_error(graph):
  placement = Placement({op.name: "/job:worker/replica:0/task:1/device:CPU:0"
                         for op in graph.ops})
  with pytest.raises(MeasureError, match="not a local device"):
    runner.measure(graph, placement, MeasureConfig(steps=1))


@pytest.mark.parametrize("device, named", [
    ("/job:worker/replica:0/task:5/device:CPU:0", "task:5"),
    ("/job:wrk/replica:0/task:0/device:CPU:0", "/job:wrk/")])
def test_a_task_or_job_the_servers_lack_is_named_before_running(
    graph, device, named):
  # TF said it after opening a session on the servers, in a long "Cannot
  # assign a device for operation h1/bias/IsInitialized/VarIsInitializedOp".
  # Nothing answers on these ports: the check comes before any connection.
  placement = Placement({op.name: device for op in graph.ops})
  config = MeasureConfig(target="grpc://127.0.0.1:1",
                         workers=("127.0.0.1:1", "127.0.0.1:2"), steps=1)
  with pytest.raises(MeasureError, match=f"puts ops on .*{named}.* which the "
                     "target grpc://127.0.0.1:1 lacks: its 2 worker"):
    runner.measure(graph, placement, config)


def test_a_gpu_this_machine_lacks_is_an_error(graph):
  from tfplace.measurement.local_devices import visible_gpus
  have = visible_gpus()
  gpu = f"/job:localhost/replica:0/task:0/device:GPU:{have}"
  placement = Placement({op.name: gpu for op in graph.ops})
  with pytest.raises(MeasureError, match=f"GPU:{have} is named but "
                     f"TensorFlow sees {have} GPU"):
    runner.measure(graph, placement, MeasureConfig(steps=1))


def test_local_devices_count_cpus_and_refuse_other_types():
  from tfplace.measurement.local_devices import local_cpus_for
  assert local_cpus_for([CPU % 2, CPU % 0]) == 3
  assert local_cpus_for([]) == 1
  with pytest.raises(MeasureError, match="only CPU and GPU"):
    local_cpus_for(["/job:localhost/replica:0/task:0/device:TPU:0"])


def test_unreachable_target_fails_fast(graph):
  from tfplace.measurement.local_cluster import free_ports
  port = free_ports(1)[0]
  placement = Placement({op.name: "/job:worker/replica:0/task:0/device:CPU:0"
                         for op in graph.ops})
  start = time.monotonic()
  with pytest.raises(MeasureError, match="not reachable"):
    runner.measure(graph, placement, MeasureConfig(
        target=f"grpc://127.0.0.1:{port}", steps=1, timeout_s=5))
  assert time.monotonic() - start < 5


def test_top_level_measure_is_callable_twice(graph):
  placement = Placement({op.name: CPU % 0 for op in graph.ops})
  first = tfplace.measure(graph, placement, MeasureConfig(warmup=0, steps=1))
  second = tfplace.measure(graph, placement, MeasureConfig(warmup=0, steps=1))
  assert first.median_step_time_s > 0 and second.median_step_time_s > 0


def test_watchdog_fires_when_run_hangs(graph, monkeypatch):
  import threading as th
  release = th.Event()
  monkeypatch.setattr(runner, "WATCHDOG_GRACE_S", 0.2)
  monkeypatch.setattr(runner, "_run", lambda spec, collected: release.wait(30))
  placement = Placement({op.name: CPU % 0 for op in graph.ops})
  start = time.monotonic()
  with pytest.raises(MeasureError, match="did not return"):
    runner.measure(graph, placement, MeasureConfig(steps=1, timeout_s=0.3))
  release.set()
  assert time.monotonic() - start < 5


def test_without_held_leaves_the_gpus_as_they_are():
  peaks = {CPU % 0: 5000, CPU % 1: 5000, GPU: 9000}
  assert timing.without_held(peaks, 1200) == {CPU % 0: 3800, CPU % 1: 3800,
                                              GPU: 9000}
  assert timing.without_held({CPU % 0: 100}, 1200) == {CPU % 0: 0}


_HELD_SCRIPT = """
import json, numpy as np, tfplace, tensorflow as tf
from tfplace.measurement import runner
from tfplace.measurement.config import MeasureConfig
from tfplace.models.registry import build_model
from tfplace.placement import Placement
held = tf.constant(np.ones(1 << 20, np.float32))  # 4 MiB of this process's
graph = build_model("mlp_towers", num_towers=2, hidden=8, batch_size=4,
                    input_size=8, num_layers=1)
cpu = "/job:localhost/replica:0/task:0/device:CPU:0"
timing = runner.measure(graph, Placement({op.name: cpu for op in graph.ops}),
                        MeasureConfig(warmup=1, steps=1))
print(json.dumps([timing.peak_memory_bytes[cpu], timing.process_cpu_bytes]))
"""


def test_in_process_peak_leaves_out_the_processs_own_tensors():
  # In process the session's CPU shares the BFC allocator with the client's
  # own tensors (a Keras model imported in the same process held ~30 KiB):
  # `tfplace measure` read 189.5 KiB where the same step on a TF server
  # worker peaks at 160 KiB. Here a 4 MiB eager tensor beside a step of
  # ~50 KiB.
  import json
  import subprocess
  import sys
  env = dict(os.environ, TF_CPU_ALLOCATOR_USE_BFC="true")
  proc = subprocess.run([sys.executable, "-c", _HELD_SCRIPT], env=env,
                        capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr
  peak, held = json.loads(proc.stdout.strip().splitlines()[-1])
  assert held >= 4 << 20
  assert 0 < peak < 1 << 20
