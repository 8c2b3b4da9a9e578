"""Microbenchmarks of a cluster: physical figures, stored and read back."""

import dataclasses
import json
import subprocess
import sys
import types

import numpy as np
import pytest

import tfplace  # noqa: F401
from tfplace.cost.cluster import Cluster
from tfplace.errors import MeasureError
from tfplace.measurement import cluster_benchmark
from tfplace.measurement.cluster_benchmark import (BenchmarkConfig,
                                                   ClusterBenchmark,
                                                   DeviceBenchmark,
                                                   LinkBenchmark)
from tfplace.measurement.config import MeasureConfig
from tfplace.measurement.local_cluster import LocalCluster, make_worker_cluster

SMALL = BenchmarkConfig(matmul_size=128, conv_shape=(2, 16, 16),
                        copy_elements=1 << 20, tiny_ops=200, messages=8,
                        transfer_sizes=(4 << 10, 1 << 20, 4 << 20))


def _check_physical(bench: ClusterBenchmark, names):
  assert [d.device for d in bench.devices] == names
  for d in bench.devices:
    assert 1e8 < d.matmul_flops < 1e14
    assert 1e8 < d.conv_flops < 1e14
    # Between the narrow convolutions' 2 output channels and the full ones'
    # (16 in SMALL, 64 by default).
    assert 2 <= d.conv_lanes <= 64
    assert 1e8 < d.copy_bandwidth < 1e13
    # A normal value costs a uniform one's generator and a Box-Muller
    # transform: a lower rate.
    assert 1e6 < d.random_normal_rate < d.random_uniform_rate < 1e13
    assert 0 <= d.op_overhead_s < 1e-3 and 0 <= d.traced_op_s < 1e-3
    assert 0 < d.empty_step_s < 1.0
  assert {(l.src, l.dst) for l in bench.links} == {
      (a, b) for a in names for b in names if a != b}
  for l in bench.links:
    assert 0 <= l.message_overhead_s < 0.1 and 0 <= l.latency_s < 0.1
    assert 1e6 < l.bandwidth < 1e13
  assert 0 < bench.empty_step_s < 1.0


def test_local_cluster_measures_its_workers_and_keeps_the_figures(tmp_path):
  from tfplace.cli.cluster_arg import load_cluster_arg
  from tfplace.measurement.cluster_benchmark import benchmark_cluster
  out = tmp_path / "measured.json"
  with LocalCluster(num_workers=2) as lc:
    plain = lc.to_cluster()
    bench = benchmark_cluster(plain, MeasureConfig(target=lc.target,
                                                   steps=3, warmup=1),
                              SMALL, progress=False)
    lc.measured = bench
    measured = lc.to_cluster()
    state = lc.state()
    # The same for servers named by a cluster spec (real hosts), from the
    # CLI: printed, and written as a cluster JSON.
    cli = subprocess.run(
        [sys.executable, "-m", "tfplace.cli.main", "cluster", "benchmark",
         "--cluster_spec", json.dumps(lc.cluster_spec), "--out", str(out),
         "--json"], capture_output=True, text=True, timeout=240)
    # From a `cluster up` state file, without --out (optional; it said
    # "--out is required"): the state file is updated in place.
    state_file = tmp_path / "up.json"
    state_file.write_text(json.dumps(dict(state, benchmark=None)))
    in_place = subprocess.run(
        [sys.executable, "-m", "tfplace.cli.main", "cluster", "benchmark",
         "--state", str(state_file)], capture_output=True, text=True,
        timeout=240)
  assert cli.returncode == 0, cli.stderr[-2000:]
  assert in_place.returncode == 0, in_place.stderr[-2000:]
  assert f"measured cluster written to {state_file}" in in_place.stdout
  _check_physical(ClusterBenchmark.from_dict(
      json.loads(state_file.read_text())["benchmark"]), plain.device_names)
  printed = json.loads(cli.stdout.strip().splitlines()[-1])
  _check_physical(ClusterBenchmark.from_dict(printed["benchmark"]),
                  plain.device_names)
  written = Cluster.from_json_file(str(out))
  assert written.to_dict() == printed["cluster"]
  assert written.devices[1].matmul_flops > 0
  _check_physical(bench, plain.device_names)
  assert ClusterBenchmark.from_dict(json.loads(json.dumps(
      bench.to_dict()))) == bench
  for d, m in zip(measured.devices, bench.devices):
    assert d.matmul_flops == m.matmul_flops
    assert d.launch_overhead_s == m.op_overhead_s
    assert d.conv_lanes == m.conv_lanes > 0
    assert d.random_normal_rate == m.random_normal_rate > 0
    assert d.conv_grad_buffers is m.conv_grad_buffers is not None
  assert measured.overlap_latency and len(measured.links) == 2
  # The state file of `tfplace cluster up` holds the measured cluster, and
  # --cluster STATE reads it back.
  path = tmp_path / "state.json"
  path.write_text(json.dumps(state))
  assert load_cluster_arg(str(path)).devices == measured.devices


def _bench(empties=(4e-4, 7e-4), all_empty=8e-4):
  names = make_worker_cluster(len(empties)).device_names
  devices = tuple(DeviceBenchmark(n, 1e11, 5e10, 1e10, 2e-7, 5e-7, e)
                  for n, e in zip(names, empties))
  links = tuple(LinkBenchmark(a, b, 5e-5, 2e-5, 1e9, hop_s=1.202e-4)
                for a in names for b in names if a != b)
  return ClusterBenchmark(devices, links, all_empty)


def test_empty_steps_split_into_a_base_and_one_cost_per_device():
  base, run = _bench().step_overheads()
  assert base == pytest.approx(3e-4)
  assert list(run.values()) == pytest.approx([1e-4, 4e-4])
  # Sub-additive steps cannot make the base negative or above a step.
  base, run = _bench(all_empty=2e-3).step_overheads()
  assert base == 0.0 and list(run.values()) == pytest.approx([4e-4, 7e-4])
  base, _ = _bench(all_empty=1e-5).step_overheads()
  assert base == pytest.approx(4e-4)


def test_message_share_keeps_the_measured_hop():
  bench = _bench()
  half = bench.with_message_share(0.5)
  for l in half.links:
    assert l.message_overhead_s == pytest.approx(2.5e-5)
    # hop = tiny + 2 x cost + latency stays 120.2 us.
    assert 2e-7 + 2 * l.message_overhead_s + l.latency_s == pytest.approx(
        1.202e-4)
  cluster = half.apply(make_worker_cluster(2))
  assert [d.transfer_overhead_s for d in cluster.devices] == pytest.approx(
      [2.5e-5] * 2)
  assert [d.transfer_byte_s for d in cluster.devices] == [0.0, 0.0]


def test_byte_share_moves_time_per_byte_from_the_link_to_the_hosts():
  bench = _bench()
  bw = bench.links[0].bandwidth
  shared = bench.with_message_share(1.0, 0.6)
  for l in shared.links:
    # One tensor in a chain still takes 1 / bw per byte: 2 ends + link.
    assert 2 * l.host_byte_s + 1 / l.bandwidth == pytest.approx(1 / bw)
    assert l.host_byte_s == pytest.approx(0.3 / bw)
  cluster = shared.apply(make_worker_cluster(2))
  assert [d.transfer_byte_s for d in cluster.devices] == pytest.approx(
      [0.3 / bw] * 2)
  with pytest.raises(MeasureError):
    bench.with_message_share(1.0, 1.0)


@pytest.mark.parametrize("field,value", [
    ("matmul_flops", 0.0), ("copy_bandwidth", -1.0),
    ("op_overhead_s", float("nan")), ("empty_step_s", float("inf"))])
def test_unphysical_figures_are_refused(field, value):
  data = _bench().to_dict()
  data["devices"][0][field] = value
  with pytest.raises(MeasureError, match="not physical"):
    ClusterBenchmark.from_dict(data)
  data = _bench().to_dict()
  data["links"][0]["bandwidth"] = 0.0
  with pytest.raises(MeasureError, match="not physical"):
    ClusterBenchmark.from_dict(data)
  with pytest.raises(MeasureError, match="format"):
    ClusterBenchmark.from_dict({"devices": []})


def test_apply_leaves_unmeasured_devices_alone():
  bench = _bench()
  cluster = make_worker_cluster(3)
  out = bench.apply(cluster)
  assert out.devices[2] == cluster.devices[2]
  assert out.devices[0].copy_bandwidth == 1e10
  assert np.isfinite(out.link_latency).all()
  assert dataclasses.replace(bench, links=()).apply(cluster).links == ()


def test_apply_keeps_each_pair_s_link_kind():
  # A GPU worker: its GPU's link to its CPU is PCIe, the workers' loopback.
  cluster = make_worker_cluster(2, cores_per_worker=4, gpus_per_worker=(1,))
  names = cluster.device_names
  bench = ClusterBenchmark(
      tuple(DeviceBenchmark(n, 1e11, 5e10, 1e10, 2e-7, 5e-7, 4e-4)
            for n in names),
      tuple(LinkBenchmark(a, b, 5e-5, 2e-5, 1e9, hop_s=1.202e-4)
            for a in names for b in names if a != b), 8e-4)
  kinds = {(l.src, l.dst): l.kind for l in bench.apply(cluster).links}
  assert kinds[(names[0], names[1])] == kinds[(names[1], names[0])] == "pcie"
  assert kinds[(names[1], names[2])] == kinds[(names[2], names[0])] == (
      "loopback")


class _DriftingRunner(cluster_benchmark.BenchmarkRunner):
  """A runner whose machine slows by `drift` seconds per run: fetch "a"
  costs 10 ms, "b" 4 ms, plus the drift so far."""

  def __init__(self, drift):
    super().__init__(session=None, config=MeasureConfig(steps=10, warmup=1))
    self.drift = drift
    self.calls = 0

  def _run(self, fetch, trace=False):
    self.calls += 1
    base = {"a": 0.010, "b": 0.004}[fetch[0]]
    return base + self.drift * self.calls, None


def test_paired_differences_cancel_a_drifting_machine():
  # Per run the machine slows by 1 ms (a tenth of "a"'s cost); in each
  # back-to-back pair the later run pays 1 ms more, and the order
  # alternates, so the median pair difference stays 6 ms (+-1 ms), while
  # the difference of two medians taken one after the other is off by the
  # drift over a whole batch of runs.
  runner = _DriftingRunner(drift=1e-3)
  paired = runner.median_difference(["a"], ["b"])
  runs = cluster_benchmark.PAIRED_RUNS_FACTOR * 20
  assert runner.calls == 2 * (runs + 1)
  assert abs(paired - 0.006) <= 1e-3 + 1e-12
  runner = _DriftingRunner(drift=1e-3)
  a = runner.median(["a"])
  b = runner.median(["b"])
  assert abs((a - b) - 0.006) > 0.01
  # No drift: exact.
  assert _DriftingRunner(drift=0.0).median_difference(
      ["a"], ["b"]) == pytest.approx(0.006)


def test_machine_drift_is_later_over_earlier_time():
  from tfplace.measurement.machine_drift import machine_drift
  device = DeviceBenchmark("/d:0", 1e11, 2e11, 5e10, 1e-7, 4e-7, 5e-4)
  link = LinkBenchmark("/d:0", "/d:1", 5e-5, 6e-5, 1e9)
  earlier = ClusterBenchmark((device,), (link,), 1e-3)
  later = ClusterBenchmark(
      (dataclasses.replace(device, matmul_flops=0.8e11, conv_flops=1.6e11,
                           op_overhead_s=1.2e-7),),
      (dataclasses.replace(link, message_overhead_s=7.5e-5),), 0.9e-3)
  drift = machine_drift(earlier, later)
  # Rates down 20 %: the same work takes 1.25x as long.
  assert drift.compute == pytest.approx(1.25)
  assert drift.per_op == pytest.approx(1.2)
  assert drift.message == pytest.approx(1.5)
  assert drift.empty_step == pytest.approx(0.9)
  assert drift.describe() == ("compute x1.25, per op x1.20, per message "
                              "x1.50, empty step x0.90")
  same = machine_drift(earlier, earlier)
  assert (same.compute, same.per_op, same.message, same.empty_step) == (
      1.0, 1.0, 1.0, 1.0)


def test_benchmark_spread_is_the_widest_pair_per_figure():
  from tfplace.measurement.machine_drift import (STEADY_LIMIT,
                                                 benchmark_spread,
                                                 describe_spread)
  device = DeviceBenchmark("/d:0", 1e11, 2e11, 5e10, 1e-7, 4e-7, 5e-4)
  link = LinkBenchmark("/d:0", "/d:1", 5e-5, 6e-5, 1e9)
  before = ClusterBenchmark((device,), (link,), 1e-3)
  # Amid the runs the machine was slower (compute 1.1x, messages 1.4x),
  # after them faster than before (empty step 0.8x).
  amid = ClusterBenchmark(
      (dataclasses.replace(device, matmul_flops=1e11 / 1.1,
                           conv_flops=2e11 / 1.1),),
      (dataclasses.replace(link, message_overhead_s=7e-5),), 1e-3)
  after = ClusterBenchmark((device,), (link,), 0.8e-3)
  spread = benchmark_spread([before, amid, after])
  assert spread.compute == pytest.approx(1.1)
  assert spread.per_op == pytest.approx(1.0)
  assert spread.message == pytest.approx(1.4)
  assert spread.empty_step == pytest.approx(1.25)  # Inverted: >= 1.
  assert spread.largest() == pytest.approx(1.4)
  text = describe_spread(spread, 3)
  assert text.startswith("the machine during calibration: its 3 "
                         "benchmarks differ by up to compute x1.10")
  assert "NOT steady" in text and spread.largest() > STEADY_LIMIT
  steady = benchmark_spread([before, before])
  assert steady.largest() == 1.0
  assert "NOT steady" not in describe_spread(steady, 2)
  assert benchmark_spread([before]) is None
  assert describe_spread(None, 1) == ""


def test_a_drift_adjusted_calibration_scales_each_part_by_its_ratio():
  from tfplace.cost.calibrated import STRIDED, Calibration, OpTypeCost
  from tfplace.measurement.machine_drift import MachineDrift, drift_adjusted
  conv = OpTypeCost(1e-6, 0.5, 10, (1e-5, 1e-4), (2e-5, 1e-4),
                    variants={STRIDED: OpTypeCost(0.0, 1.0, 3, (1e-5, 1e-4),
                                                  (4e-5, 2e-4)),
                              "batched": OpTypeCost(2e-6, 3.0, 4)})
  cal = Calibration(
      compute_scale={"CPU": 2.0}, launch_overhead_s={"CPU": 1e-6},
      transfer_overhead_s={"CPU": 5e-5}, recv_issue_s={"CPU": 1.5e-5},
      run_overhead_s={"/job:worker/task:0/device:CPU:0": 4e-4},
      step_overhead_s=1e-4, op_types={"CPU": {"Conv2D": conv}},
      trace_excess_s={"CPU": 1e-6})
  got = drift_adjusted(cal, MachineDrift(compute=1.25, per_op=1.2,
                                         message=1.5, empty_step=0.9))
  cost = got.op_types["CPU"]["Conv2D"]
  assert (cost.fixed_s, cost.scale) == pytest.approx((1.25e-6, 0.625))
  assert cost.curve_time_s == pytest.approx((2.5e-5, 1.25e-4))
  assert cost.curve_work_s == conv.curve_work_s
  assert cost.variants[STRIDED].curve_time_s == pytest.approx(
      (5e-5, 2.5e-4))
  assert (cost.variants["batched"].fixed_s,
          cost.variants["batched"].scale) == pytest.approx((2.5e-6, 3.75))
  assert got.compute_scale["CPU"] == pytest.approx(2.5)
  assert got.launch_overhead_s["CPU"] == pytest.approx(1.2e-6)
  assert got.transfer_overhead_s["CPU"] == pytest.approx(7.5e-5)
  assert got.recv_issue_s["CPU"] == pytest.approx(2.25e-5)
  assert got.run_overhead_s["/job:worker/task:0/device:CPU:0"] == (
      pytest.approx(3.6e-4))
  assert got.step_overhead_s == pytest.approx(0.9e-4)
  assert got.trace_excess_s == cal.trace_excess_s
  # No drift: the same calibration.
  assert drift_adjusted(cal, MachineDrift(1.0, 1.0, 1.0, 1.0)) == cal


def _scaled_bench(scale: float) -> ClusterBenchmark:
  devices = tuple(DeviceBenchmark(f"/d:{i}", 1e11 * scale, 2e11, 5e10,
                                  1e-7 * scale, 4e-7, 5e-4 * scale)
                  for i in range(2))
  links = (LinkBenchmark("/d:0", "/d:1", 5e-5 * scale, 6e-5, 1e9, 2e-4),
           LinkBenchmark("/d:1", "/d:0", 4e-5 * scale, 6e-5, 1e9, 2e-4))
  return ClusterBenchmark(devices, links, 1e-3 * scale)


def test_median_benchmark_takes_each_figure_s_median():
  # One benchmark caught a burst of load (scale 3): the median ignores it.
  median = cluster_benchmark.median_benchmark(
      [_scaled_bench(1.0), _scaled_bench(3.0), _scaled_bench(1.2)])
  assert [d.device for d in median.devices] == ["/d:0", "/d:1"]
  assert median.devices[1].matmul_flops == pytest.approx(1.2e11)
  assert median.devices[0].empty_step_s == pytest.approx(6e-4)
  assert median.devices[0].conv_flops == 2e11
  assert (median.links[1].src, median.links[1].dst) == ("/d:1", "/d:0")
  assert median.links[1].message_overhead_s == pytest.approx(4.8e-5)
  assert median.empty_step_s == pytest.approx(1.2e-3)
  one = _scaled_bench(2.0)
  assert cluster_benchmark.median_benchmark([one]) == one
  with pytest.raises(MeasureError, match="at least one"):
    cluster_benchmark.median_benchmark([])
  full = _scaled_bench(1.0)
  other = dataclasses.replace(full, links=full.links[:1])
  with pytest.raises(MeasureError, match="different devices or links"):
    cluster_benchmark.median_benchmark([_scaled_bench(1.0), other])


def test_calibration_benchmarks_spread_over_the_suite(monkeypatch):
  from tfplace.measurement import calibration_runs
  events = []
  scales = iter([1.0, 3.0, 1.2])

  def fake_benchmark(*args, **kwargs):
    events.append("bench")
    return _scaled_bench(next(scales))

  def fake_measure(label, graph, *args, **kwargs):
    events.append(graph.name)
    splits.append(kwargs["splits"])
    assert kwargs["rounds"] == 2
    return calibration_runs.GraphRuns(label, graph, (), ())

  def fake_report(cluster, bench, runs, bounds, benchmark_repeats):
    repeats.append(benchmark_repeats)
    return calibration_runs.CalibrationReport(
        tuple(r.label for r in runs), 0, None, bench, (), float("nan"), 0)

  def fake_again(runs, *args, **kwargs):
    events.append("again")
    return list(runs), "measured again"

  repeats, splits = [], []

  monkeypatch.setattr(calibration_runs, "benchmark_cluster", fake_benchmark)
  monkeypatch.setattr(calibration_runs, "_measure_graph", fake_measure)
  monkeypatch.setattr(calibration_runs, "report_from_runs", fake_report)
  monkeypatch.setattr(calibration_runs, "measure_splits_again", fake_again)
  monkeypatch.setattr(calibration_runs, "with_recv_issue",
                      lambda bench, cluster, config: (
                          events.append("issue"), bench)[1])
  graphs = [types.SimpleNamespace(name=n) for n in "abcab"]
  report = calibration_runs.calibrate_on_cluster(
      graphs, None, None, rounds=2, bench_repeats=3)
  bench, labels = report.benchmark, list(report.graph_names)
  # Before the first graph, after round(5 / 2) = 2 graphs and after all,
  # the split runs' second pass included.
  assert events == ["bench", "a", "b", "bench", "c", "a", "b", "again",
                    "bench", "issue"]
  assert report.second_pass == "measured again"
  assert bench == cluster_benchmark.median_benchmark(
      [_scaled_bench(1.0), _scaled_bench(3.0), _scaled_bench(1.2)])
  # Labels count repeats over the whole suite, not per share.
  assert labels == ["a", "b", "c", "a#1", "b#1"]
  # The report keeps the three, to say how steady the machine was.
  assert repeats == [(_scaled_bench(1.0), _scaled_bench(3.0),
                      _scaled_bench(1.2))]
  assert splits == [True] * 5
  events.clear()
  splits.clear()
  given = _scaled_bench(5.0)
  bench = calibration_runs.calibrate_on_cluster(
      graphs[:2], None, None, bench=given, rounds=2,
      one_device_only={"b"}).benchmark
  # Given: not measured.
  assert events == ["a", "b", "again"] and bench == given
  assert splits == [True, False]  # b: its one-device runs alone.
  assert repeats[-1] == ()
  splits.clear()
  suite_like = [types.SimpleNamespace(name=n) for n in (
      "calib_conv", "calib_depthwise", "calib_attention")]
  calibration_runs.calibrate_on_cluster(suite_like, None, None, bench=given,
                                        rounds=2)
  assert splits == [True, False, False]  # The suite's rule, by default.
  with pytest.raises(MeasureError, match="bench_repeats"):
    calibration_runs.calibrate_on_cluster(graphs, None, None,
                                          bench_repeats=0)


def test_conv_lanes_reach_the_cluster_and_the_calibration():
  from tfplace.cost.calibrated import apply_calibration
  from tfplace.measurement.calibration_fit import calibration_from_benchmark
  plain = make_worker_cluster(2)
  bench = _bench()
  bench = dataclasses.replace(bench, devices=tuple(
      dataclasses.replace(d, conv_lanes=lanes)
      for d, lanes in zip(bench.devices, (15.0, 17.0))))
  assert [d.conv_lanes for d in bench.apply(plain).devices] == [15.0, 17.0]
  assert "conv lanes 15.0" in bench.describe()
  calibration = calibration_from_benchmark(bench, plain)
  assert calibration.device_rates["CPU"]["conv_lanes"] == 16.0
  assert [d.conv_lanes for d in apply_calibration(
      plain, calibration).devices] == [16.0, 16.0]
  # A benchmark file written before the lanes were measured: none, and the
  # cluster's convolutions keep their old costs.
  data = json.loads(json.dumps(bench.to_dict()))
  for d in data["devices"]:
    del d["conv_lanes"]
  old = ClusterBenchmark.from_dict(data)
  assert [d.conv_lanes for d in old.devices] == [0.0, 0.0]
  assert "conv lanes" not in old.describe()
  assert "conv_lanes" not in calibration_from_benchmark(
      old, plain).device_rates["CPU"]
  assert "conv_lanes" not in old.apply(plain).to_dict()["devices"][0]


def test_random_rates_reach_the_cluster_and_the_calibration():
  from tfplace.cost.calibrated import apply_calibration
  from tfplace.measurement.calibration_fit import calibration_from_benchmark
  plain = make_worker_cluster(2)
  bench = dataclasses.replace(_bench(), devices=tuple(
      dataclasses.replace(d, random_uniform_rate=2e8, random_normal_rate=rate)
      for d, rate in zip(_bench().devices, (4e7, 6e7))))
  assert [d.random_normal_rate for d in bench.apply(plain).devices] == [
      4e7, 6e7]
  assert "random uniform 200 / normal 40 M values/s" in bench.describe()
  calibration = calibration_from_benchmark(bench, plain)
  assert calibration.device_rates["CPU"]["random_normal_rate"] == 5e7
  assert [d.random_uniform_rate for d in apply_calibration(
      plain, calibration).devices] == [2e8, 2e8]
  # A file written before they were measured: none, and random ops keep
  # their old costs.
  data = json.loads(json.dumps(bench.to_dict()))
  for d in data["devices"]:
    del d["random_uniform_rate"], d["random_normal_rate"]
  old = ClusterBenchmark.from_dict(data)
  assert [d.random_normal_rate for d in old.devices] == [0.0, 0.0]
  assert "random" not in old.describe()
  assert "random_normal_rate" not in calibration_from_benchmark(
      old, plain).device_rates["CPU"]
  assert "random_normal_rate" not in old.apply(plain).to_dict()["devices"][0]


def test_a_transient_failure_reruns_the_benchmark_once(monkeypatch):
  from tfplace.measurement.session import TransientRunError
  calls = []

  def flaky(cluster, config, built, progress):
    calls.append(1)
    if len(calls) <= failures:
      raise TransientRunError("AbortedError: request received twice")
    return _bench()

  monkeypatch.setattr(cluster_benchmark, "_benchmark_once", flaky)
  cluster = make_worker_cluster(2)
  failures = 1
  assert cluster_benchmark.benchmark_cluster(cluster, MeasureConfig(),
                                             SMALL) == _bench()
  assert len(calls) == 2
  calls.clear()
  failures = 2
  with pytest.raises(MeasureError, match="failed twice: first AbortedError"):
    cluster_benchmark.benchmark_cluster(cluster, MeasureConfig(), SMALL)
  assert len(calls) == 2


def test_logical_cpus_of_one_process_are_refused_with_the_reason():
  # They share memory: a tensor between them is not copied, and the link
  # benchmark would only report noise.
  from tfplace.cost.presets import cpu_cluster
  with pytest.raises(MeasureError, match="several logical CPUs"):
    cluster_benchmark.benchmark_cluster(cpu_cluster(2), MeasureConfig(),
                                        SMALL, progress=False)


def test_launch_chains_hold_ops_of_their_kind_and_run():
  import tensorflow as tf
  from tfplace.cost.launch_kinds import KINDS, launch_kind
  from tfplace.measurement import cluster_benchmark_graphs as graphs
  graph = tf.Graph()
  with graph.as_default(), tf.device("/cpu:0"):
    chains = graphs._launch_chains(3)
  # Every kind but the element-wise one (the tiny chain) has a chain, and
  # every op of it is of that kind: the benchmark measures what the cost
  # model charges.
  assert set(chains) == set(KINDS) - {"elementwise"}
  by_name = {op.name: op for op in graph.get_operations()}
  with tf.compat.v1.Session(graph=graph) as session:
    for kind, (fetch, ops) in chains.items():
      assert len(ops) == 3
      assert {launch_kind(by_name[n].type) for n in ops} == {kind}
      # Nothing else is in the chain's scope.
      assert {n for n in by_name if n.startswith(f"launch_{kind}/")} == set(
          ops)
      session.run(list(fetch))
      # Each op runs after the one before (data or control edge).
      for before, after in zip(ops, ops[1:]):
        inputs = {t.op.name for t in by_name[after].inputs} | {
            c.name for c in by_name[after].control_inputs}
        assert before in inputs


def test_an_accelerator_measures_launch_costs_per_kind(monkeypatch):
  # The accelerator part of the benchmark, run on this machine's CPU (its
  # type patched to "GPU" where the graph is built): GPU-sized ops at the
  # sizes given, and one launch cost per kind, the element-wise one the
  # per-op overhead.
  from tfplace.cost.launch_kinds import KINDS
  from tfplace.cost.presets import local
  from tfplace.measurement import cluster_benchmark_graphs as graphs
  monkeypatch.setattr(graphs, "device_type_of", lambda name: "GPU")
  config = dataclasses.replace(SMALL, accelerator_matmul_size=96,
                               accelerator_conv_shape=(2, 8, 8),
                               launch_ops=8, tiny_ops=50)
  cluster = local()
  bench = cluster_benchmark.benchmark_cluster(
      cluster, MeasureConfig(steps=3, warmup=1), config, progress=False)
  (device,) = bench.devices
  assert set(device.launch_s) == set(KINDS)
  assert device.launch_s["elementwise"] == device.op_overhead_s
  assert all(0 <= s < 1e-2 for s in device.launch_s.values())
  # A convolution's launch (its work included, at these sizes) costs more
  # than passing a buffer on.
  assert device.launch_s["conv"] > device.launch_s["no_kernel"]
  assert "launch conv:" in bench.describe()
  assert ClusterBenchmark.from_dict(json.loads(json.dumps(
      bench.to_dict()))) == bench
  # Each kind's median over benchmarks; a kind one benchmark lacks is left
  # out.
  other = dataclasses.replace(bench, devices=(dataclasses.replace(
      device, launch_s={k: 3 * s for k, s in device.launch_s.items()
                        if k != "matmul"}),))
  third = dataclasses.replace(bench, devices=(dataclasses.replace(
      device, launch_s={k: 2 * s for k, s in device.launch_s.items()}),))
  median = cluster_benchmark.median_benchmark([bench, other, third])
  assert set(median.devices[0].launch_s) == set(KINDS) - {"matmul"}
  assert median.devices[0].launch_s["conv"] == pytest.approx(
      2 * device.launch_s["conv"])


def test_a_negative_launch_cost_is_refused():
  data = json.loads(json.dumps(_bench().to_dict()))
  data["devices"][0]["launch_s"] = {"conv": -1e-6, "elementwise": 1e-6}
  with pytest.raises(MeasureError, match=r"launch_s\[conv\]"):
    ClusterBenchmark.from_dict(data)
  data["devices"][0]["launch_s"] = {"conv": "fast"}
  with pytest.raises(MeasureError, match="malformed"):
    ClusterBenchmark.from_dict(data)


def test_the_benchmark_finds_whether_cpu_gradients_take_patch_buffers(
    monkeypatch):
  # With TF's own kernels (oneDNN off in the workers) the probe's filter
  # gradient takes its 32 MiB buffer from the allocator; a benchmark of
  # none leaves the device's figure as it was.
  from tfplace.measurement.cluster_benchmark import benchmark_cluster
  monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "0")
  with LocalCluster(num_workers=1) as lc:
    plain = lc.to_cluster()
    bench = benchmark_cluster(plain, MeasureConfig(target=lc.target,
                                                   steps=2, warmup=1),
                              SMALL, progress=False)
  assert [d.conv_grad_buffers for d in bench.devices] == [True]
  off = dataclasses.replace(bench, devices=tuple(
      dataclasses.replace(d, conv_grad_buffers=False) for d in bench.devices))
  assert not off.apply(plain).devices[0].conv_grad_buffers
  assert "no patch buffers" in off.describe()
  unknown = dataclasses.replace(bench, devices=tuple(
      dataclasses.replace(d, conv_grad_buffers=None) for d in bench.devices))
  assert unknown.apply(dataclasses.replace(
      plain, devices=off.apply(plain).devices)).devices[0].conv_grad_buffers \
      is False
