"""get_cost_model / list_cost_models, and `--cost_model` on the CLI."""

import json
import os
import subprocess
import sys

import pytest

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.cost import cost_models
from tfplace.cost.analytical import AnalyticalCostModel
from tfplace.cost.grappler_costs import GrapplerCostModel
from tfplace.cost.calibrated import CalibratedCostModel
from tfplace.errors import ClusterError, TfplaceError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
GRAPH = os.path.join(ROOT, "testdata", "matmul_relu_sum.pbtxt")
CLUSTER = os.path.join(ROOT, "testdata", "clusters", "two_cpus.json")


def test_list_cost_models():
  assert cost_models.list_cost_models() == ["analytical", "calibrated",
                                            "grappler"]


def test_get_cost_model_by_name(tmp_path):
  assert isinstance(cost_models.get_cost_model(), AnalyticalCostModel)
  assert isinstance(cost_models.get_cost_model("grappler"), GrapplerCostModel)
  path = tmp_path / "cal.json"
  path.write_text(json.dumps({"format": "tfplace.calibration/1",
                              "compute_scale": {"GPU": 2.0}}))
  model = cost_models.get_cost_model("calibrated", str(path))
  assert isinstance(model, CalibratedCostModel)
  assert model.calibration.compute_scale == {"GPU": 2.0}


def test_bad_names_and_missing_calibration(tmp_path):
  with pytest.raises(TfplaceError, match="analytical, calibrated, grappler"):
    cost_models.get_cost_model("roofline")
  with pytest.raises(TfplaceError, match="--calibration"):
    cost_models.get_cost_model("calibrated")
  with pytest.raises(ClusterError, match="no such calibration file"):
    cost_models.get_cost_model("calibrated", str(tmp_path / "none.json"))


CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"


def _simulate_on_cpu0(tmp_path, *flags):
  """`tfplace simulate` of GRAPH, every op on CPU0, with `flags`."""
  placement = tmp_path / "p.json"
  placement.write_text(json.dumps({"placement": {
      name: CPU0 for name in ("x", "w", "matmul", "relu", "Const", "sum")}}))
  return subprocess.run(
      [sys.executable, "-m", "tfplace", "simulate", GRAPH, "--cluster",
       CLUSTER, "--placement", str(placement), "--json", *flags],
      capture_output=True, text=True, timeout=120)


def test_simulate_cli_cost_model_flag(tmp_path):
  def simulate(name):
    return _simulate_on_cpu0(tmp_path, "--cost_model", name)

  r = simulate("grappler")
  assert r.returncode == 0, r.stderr
  out = json.loads(r.stdout)
  # Busy time = the sum of the 6 ops' times on CPU:0: 6 launch overheads of
  # 1e-5 s (two_cpus.json) plus grappler's estimates (well under 1 us here).
  busy = out["device_busy_s"][CPU0]
  assert 6e-5 <= busy < 6e-5 + 1e-6
  r = simulate("roofline")
  assert r.returncode == 2 and "grappler" in r.stderr


def test_a_calibration_from_an_unsteady_machine_warns_when_used(tmp_path):
  def simulate(spread):
    path = tmp_path / "cal.json"
    path.write_text(json.dumps({"format": "tfplace.calibration/1",
                                "compute_scale": {"CPU": 1.0},
                                "benchmark_spread": spread}))
    return _simulate_on_cpu0(tmp_path, "--calibration", str(path))

  r = simulate({"compute": 1.39, "per_op": 1.1, "message": 1.0,
                "empty_step": 1.0})
  assert r.returncode == 0, r.stderr
  assert "was measured on a machine that was not steady" in r.stderr
  assert "compute x1.39" in r.stderr
  r = simulate({"compute": 1.05, "per_op": 1.1, "message": 1.0,
                "empty_step": 1.0})
  assert r.returncode == 0, r.stderr
  assert "not steady" not in r.stderr
