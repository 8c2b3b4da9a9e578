"""Tests for `tfplace calibrate` (subprocess CLI runs) and the calibration
flow it shares with fidelity (`calibration_runs.report_from_runs`)."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import tfplace  # noqa: F401
from tfplace.cost.analytical import AnalyticalCostModel
from tfplace.cost.calibrated import (Calibration, CalibratedCostModel,
                                   apply_calibration)
from tfplace.graph.importers import import_graph
from tfplace.measurement.local_cluster import free_ports, make_worker_cluster
from tfplace.placement import Placement

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
OTHER_GRAPH = os.path.join(ROOT, "testdata", "mlp_2tower.pbtxt")
SPEC = json.dumps({"worker": ["127.0.0.1:1", "127.0.0.1:2"]})  # not contacted


def _tfplace(*args, timeout=240):
  return subprocess.run([sys.executable, "-m", "tfplace.cli.main", *args],
                        capture_output=True, text=True, timeout=timeout)


def _tiny_towers(path):
  from tfplace.cli.import_cmd import write
  from tfplace.models.registry import build_model
  graph = build_model("mlp_towers", num_towers=2, hidden=16, batch_size=8,
                      input_size=16, num_layers=2)
  write(graph, path)


def test_calibrate_two_local_workers_then_simulate_another_graph(tmp_path):
  towers, cal_path = str(tmp_path / "towers.meta"), str(tmp_path / "cal.json")
  _tiny_towers(towers)
  out = _tfplace("calibrate", towers, "--local_workers", "2", "--out",
                 cal_path, "--num_random", "2", "--steps", "2", "--warmup",
                 "1", "--json")
  assert out.returncode == 0, out.stderr[-3000:]
  result = json.loads(out.stdout.strip().splitlines()[-1])
  # all_on_1, halves and 2 random placements, all measured.
  assert [r["label"] for r in result["runs"]][:2] == ["all_on_1", "halves"]
  assert result["num_runs"] == 4 and result["num_failed"] == 0
  errors = [abs(r["predicted_s"] - r["measured_s"]) / r["measured_s"]
            for r in result["runs"]]
  assert result["in_sample_median_abs_rel_error"] == pytest.approx(
      float(np.median(errors)))
  assert result["in_sample_median_abs_rel_error"] < 1.0
  cal = Calibration.load(cal_path)
  assert cal.to_dict() == result["calibration"]
  assert cal.compute_scale["CPU"] > 0 and "CPU" in cal.transfer_overhead_s
  if result["link_benchmarked"]:
    assert cal.links["loopback"].bandwidth > 0

  # The calibration is usable with another graph: a different file, on the
  # same kind of cluster (a cluster spec describes it without contacting it).
  graph = import_graph(OTHER_GRAPH)
  cluster = make_worker_cluster(2, name="tf_servers")
  placement_path = str(tmp_path / "p.json")
  ids = (graph.group_of % 2).astype(np.int32)
  Placement.from_array(graph, cluster, ids).save(placement_path)
  sim = _tfplace("simulate", OTHER_GRAPH, "--cluster", SPEC, "--placement",
                 placement_path, "--calibration", cal_path, "--json")
  assert sim.returncode == 0, sim.stderr[-3000:]
  step = json.loads(sim.stdout.strip().splitlines()[-1])["step_time_s"]
  assert step is not None and math.isfinite(step) and step > 0
  # Its ops of the fitted op types get scale x factor; the rest the scale.
  # (Ops outside the training step cost 0 in both models.)
  calibrated = apply_calibration(cluster, cal)
  fitted = CalibratedCostModel(cal).op_costs(graph, calibrated).compute_s[:, 0]
  base = AnalyticalCostModel().op_costs(graph, calibrated).compute_s[:, 0]
  expected = [cal.compute_scale["CPU"] * cal.op_type_scale.get(op.type, 1.0)
              for op in graph.ops]
  np.testing.assert_allclose(fitted, base * expected, rtol=1e-9)
  assert (base > 0).sum() > 10


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
  # Unknown model or file.
  path = _no_file_exit_2(tmp_path, "no_such_model", "--local_workers", "2",
                         message="neither a graph file nor a model name")
  assert not path.exists()


def test_unwritable_out_and_missing_out_exit_2(tmp_path):
  missing_dir = tmp_path / "nope" / "cal.json"
  out = _tfplace("calibrate", "mlp_towers", "--local_workers", "2", "--out",
                 str(missing_dir), timeout=120)
  assert out.returncode == 2 and "no such directory" in out.stderr
  assert not missing_dir.parent.exists()
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
