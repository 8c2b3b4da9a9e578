"""Tests for `tfplace calibrate` (subprocess CLI runs): the tiny suite on a
2-worker local cluster end to end, bad arguments."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tfplace  # noqa: F401
from tfplace.cost.calibrated import (Calibration, CalibratedCostModel,
                                     apply_calibration, calibration_coverage)
from tfplace.graph.importers import import_graph
from tfplace.measurement.calibration_fit import calibrated_simulator
from tfplace.measurement.cluster_benchmark import ClusterBenchmark
from tfplace.measurement.local_cluster import free_ports, make_worker_cluster
from tfplace.placement import Placement

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
OTHER_GRAPH = os.path.join(ROOT, "testdata", "mlp_2tower.pbtxt")
SPEC = json.dumps({"worker": ["127.0.0.1:1", "127.0.0.1:2"]})  # not contacted


def _tfplace(*args, timeout=240):
  return subprocess.run([sys.executable, "-m", "tfplace.cli.main", *args],
                        capture_output=True, text=True, timeout=timeout)


def test_calibrate_tiny_suite_on_two_local_workers_then_simulate(tmp_path):
  cal_path = str(tmp_path / "cal.json")
  out = _tfplace("calibrate", "--suite", "tiny", "--local_workers", "2",
                 "--out", cal_path, "--steps", "2", "--warmup", "1", "--json")
  assert out.returncode == 0, out.stderr[-3000:]
  result = json.loads(out.stdout.strip().splitlines()[-1])
  # Each tiny-suite graph on each worker, in halves and one random split.
  assert result["graphs"] == ["calib_matmul", "calib_elementwise"]
  assert [r["label"] for r in result["runs"]][:4] == [
      "calib_matmul:on_0", "calib_matmul:on_1", "calib_matmul:halves",
      "calib_matmul:random"]
  assert result["num_runs"] == 8 and result["num_failed"] == 0
  errors = [abs(r["predicted_s"] - r["measured_s"]) / r["measured_s"]
            for r in result["runs"]]
  assert result["in_sample_median_abs_rel_error"] == pytest.approx(
      float(np.median(errors)))
  cal = Calibration.load(cal_path)
  assert cal.to_dict() == result["calibration"]
  assert cal.seen("CPU", "MatMul") and cal.device_rates["CPU"]["matmul_flops"]
  # The empty step splits into a shared part (clipped at 0 when the
  # two-worker step is as dear as the sum of the one-worker ones) and a part
  # per worker used; a one-worker empty step costs their sum.
  assert cal.step_overhead_s >= 0 and cal.links["loopback"].bandwidth > 0
  assert len(cal.run_overhead_s) == 2 and all(
      cal.step_overhead_s + run > 0 for run in cal.run_overhead_s.values())
  bench = ClusterBenchmark.from_dict(result["benchmark"])  # physical
  assert len(bench.devices) == 2
  # Benchmarked three times (before, amid, after the runs): how far apart.
  spread = result["benchmark_spread"]
  assert set(spread) == {"compute", "per_op", "message", "empty_step"}
  assert all(v >= 1.0 for v in spread.values())
  assert cal.benchmark_spread == pytest.approx(spread)  # Kept in the file.

  # The calibration describes the cluster: usable with another graph on the
  # same kind of cluster (a cluster spec describes it without contacting
  # it), with the share of its time on op types the suite never ran.
  graph = import_graph(OTHER_GRAPH)
  cluster = make_worker_cluster(2, name="tf_servers")
  placement_path = str(tmp_path / "p.json")
  placement = Placement.from_array(graph, cluster,
                                   (graph.group_of % 2).astype(np.int32))
  placement.save(placement_path)
  sim = _tfplace("simulate", OTHER_GRAPH, "--cluster", SPEC, "--placement",
                 placement_path, "--calibration", cal_path, "--json")
  assert sim.returncode == 0, sim.stderr[-3000:]
  printed = json.loads(sim.stdout.strip().splitlines()[-1])
  calibrated = apply_calibration(cluster, cal)
  costs = CalibratedCostModel(cal).op_costs(graph, calibrated)
  expected = calibrated_simulator(graph, cluster, cal).simulate(
      placement.to_array(graph, cluster)).step_time_s
  assert printed["step_time_s"] == pytest.approx(expected)
  coverage = calibration_coverage(graph, calibrated, cal, costs,
                                  placement.to_array(graph, cluster))
  assert printed["uncalibrated_share"] == pytest.approx(
      coverage.uncalibrated_share)
  assert 0.0 <= printed["uncalibrated_share"] <= 1.0


def test_calibrate_text_report_names_each_graph_once(tmp_path):
  out = _tfplace("calibrate", "--suite", "tiny", "--in_process", "--out",
                 str(tmp_path / "cal.json"), "--steps", "2", "--warmup", "1")
  assert out.returncode == 0, out.stderr[-3000:]
  line = next(l for l in out.stdout.splitlines()
              if l.startswith("calibrated on "))
  assert line.count("calib_matmul") == 1, line
  assert line.count("calib_elementwise") == 1, line
  # One device: no split run, so no transfer figure was fitted.
  assert line.endswith("no split run: the message figures as benchmarked")


def test_calibrate_in_process_then_place_on_local(tmp_path):
  # This process's devices (the preset `local`): CPU:0, and each GPU where
  # TF sees one; the calibration is of that cluster and places on it.
  from tfplace.cost.presets import preset
  local = preset("local")
  cal_path = str(tmp_path / "cal.json")
  out = _tfplace("calibrate", "--suite", "tiny", "--in_process", "--out",
                 cal_path, "--steps", "2", "--warmup", "1", "--json")
  assert out.returncode == 0, out.stderr[-3000:]
  result = json.loads(out.stdout.strip().splitlines()[-1])
  assert result["cluster"] == "local"
  assert result["num_devices"] == local.num_devices
  assert [b["device"] for b in result["benchmark"]["devices"]] == list(
      local.device_names)
  assert result["num_runs"] >= 2 * local.num_devices
  assert result["num_failed"] == 0
  assert Calibration.load(cal_path).seen("CPU", "MatMul")
  placed = str(tmp_path / "p.json")
  run = _tfplace("place", OTHER_GRAPH, "--cluster", "local", "--placer",
                 "m_etf", "--calibration", cal_path, "--out", placed)
  assert run.returncode == 0, run.stderr[-3000:]
  assert set(Placement.load(placed).devices.values()) <= set(
      local.device_names)


def _no_file_exit_2(tmp_path, *args, message):
  out_path = tmp_path / "cal.json"
  out = _tfplace("calibrate", *args, "--out", str(out_path), timeout=120)
  assert out.returncode == 2, out.stderr[-2000:]
  assert message in out.stderr
  return out_path


def test_bad_arguments_exit_2_and_write_nothing(tmp_path):
  # No cluster option, then two of them.
  path = _no_file_exit_2(tmp_path, "mlp_towers", message="exactly one of")
  assert not path.exists()
  path = _no_file_exit_2(tmp_path, "mlp_towers", "--local_workers", "2",
                         "--target", "grpc://127.0.0.1:1",
                         message="exactly one of")
  assert not path.exists()
  path = _no_file_exit_2(tmp_path, "mlp_towers", "--local_workers", "2",
                         "--in_process", message="exactly one of")
  assert not path.exists()
  # Unknown model or file, unknown suite.
  path = _no_file_exit_2(tmp_path, "no_such_model", "--local_workers", "2",
                         message="neither a graph file nor a model name")
  assert not path.exists()
  path = _no_file_exit_2(tmp_path, "--suite", "huge", "--local_workers", "2",
                         message="unknown calibration suite")
  assert not path.exists()
  # Worker descriptions: checked before any worker starts, and only for
  # the workers --local_workers starts.
  path = _no_file_exit_2(tmp_path, "--local_workers", "2", "--worker_gpus",
                         "0,0", message="GPU 0 is given to workers 0 and 1")
  assert not path.exists()
  path = _no_file_exit_2(tmp_path, "--local_workers", "1",
                         "--cores_per_worker", "0",
                         message="--cores_per_worker must be >= 1")
  assert not path.exists()
  path = _no_file_exit_2(tmp_path, "--in_process", "--worker_gpus", "0",
                         message="describe the workers --local_workers "
                         "starts")
  assert not path.exists()


def test_unwritable_out_and_missing_out_exit_2(tmp_path):
  a_file = tmp_path / "a_file"
  a_file.write_text("kept")
  under_a_file = a_file / "cal.json"
  out = _tfplace("calibrate", "mlp_towers", "--local_workers", "2", "--out",
                 str(under_a_file), timeout=120)
  assert out.returncode == 2 and "is a file, not a directory" in out.stderr
  assert a_file.read_text() == "kept"
  out = _tfplace("calibrate", "mlp_towers", "--local_workers", "2",
                 timeout=120)
  assert out.returncode == 2 and "--out is required" in out.stderr


def test_unreachable_cluster_exit_2_keeps_old_file(tmp_path):
  out_path = tmp_path / "cal.json"
  out_path.write_text("old")
  port = free_ports(1)[0]
  spec = json.dumps({"worker": [f"127.0.0.1:{port}"]})
  out = _tfplace("calibrate", "mlp_towers", "--cluster", spec, "--out",
                 str(out_path), timeout=120)
  assert out.returncode == 2, out.stderr[-2000:]
  assert "not reachable" in out.stderr
  assert out_path.read_text() == "old"
