"""Tests for calibration fits (tfplace.measurement.calibration_fit, comm_benchmark)."""

import numpy as np
import pytest

import tfplace  # noqa: F401
from tfplace.errors import MeasureError
from tfplace.measurement.calibration_fit import OpSample, fit_calibration
from tfplace.measurement.comm_benchmark import CommSample, fit_link


def test_link_fit_recovers_latency_and_bandwidth():
  # 50 us + n / 2 GB/s, exact.
  samples = [CommSample(n, 50e-6 + n / 2e9) for n in (1e3, 1e5, 1e6, 8e6)]
  fit = fit_link(samples)
  assert fit.latency_s == pytest.approx(50e-6, rel=1e-6)
  assert fit.bandwidth == pytest.approx(2e9, rel=1e-6)
  assert fit.r2 == pytest.approx(1.0)
  assert fit.transfer_time(4e9) == pytest.approx(50e-6 + 2.0)


def test_link_fit_noisy_points():
  rng = np.random.default_rng(0)
  sizes = np.repeat([1e4, 1e5, 1e6, 4e6, 1.6e7], 4)
  times = 1e-4 + sizes / 1e9
  times = times * (1 + rng.normal(0, 0.02, size=len(times)))
  fit = fit_link([CommSample(int(n), t) for n, t in zip(sizes, times)])
  assert fit.bandwidth == pytest.approx(1e9, rel=0.05)
  assert fit.latency_s == pytest.approx(1e-4, abs=5e-5)


def test_link_fit_needs_two_sizes():
  with pytest.raises(MeasureError):
    fit_link([CommSample(100, 1e-3), CommSample(100, 2e-3)])


def _samples(scale, overhead, op_scale=None, n=20):
  op_scale = op_scale or {}
  out = []
  for i in range(n):
    r = 1e-5 * (i + 1)
    for t in ("MatMul", "Add"):
      f = op_scale.get(t, 1.0)
      out.append(OpSample(t, "CPU", r, 1.0, scale * f * (r + overhead)))
  out.append(OpSample("Identity", "CPU", 0.0, 1.0, scale * overhead))
  return out


def test_calibration_recovers_scale_and_overhead():
  cal = fit_calibration(_samples(scale=2.5, overhead=4e-6))
  assert cal.compute_scale["CPU"] == pytest.approx(2.5, rel=1e-3)
  assert cal.launch_overhead_s["CPU"] == pytest.approx(4e-6, rel=1e-2)
  assert cal.op_type_scale == {}  # every type fits the device scale


def test_calibration_op_type_factor():
  # MatMul is 2x slower than the device-wide fit predicts: its factor ends
  # up above 1 and Add's below 1 (the device scale sits between them).
  cal = fit_calibration(_samples(1.0, 1e-6, {"MatMul": 2.0}))
  f = cal.op_type_scale
  assert f["MatMul"] / f["Add"] == pytest.approx(2.0, rel=0.05)


def test_calibration_round_trips_through_json(tmp_path):
  from tfplace.cost.calibrated import Calibration
  from tfplace.measurement.comm_benchmark import LinkFit
  cal = fit_calibration(_samples(2.0, 1e-6),
                        link_fits={"loopback": LinkFit(1e-4, 1e9, 1.0, 4)})
  path = str(tmp_path / "cal.json")
  cal.save(path)
  back = Calibration.load(path)
  assert back.compute_scale["CPU"] == pytest.approx(2.0, rel=1e-3)
  assert back.links["loopback"].bandwidth == pytest.approx(1e9)


def test_calibration_needs_samples():
  with pytest.raises(MeasureError):
    fit_calibration([])


def test_fit_overheads_recovers_step_and_transfer_overheads():
  from tfplace.cost.calibrated import Calibration
  from tfplace.measurement.calibration_fit import (OverheadSearch,
                                               calibrated_simulator,
                                               fit_overheads)
  from tfplace.measurement.local_cluster import make_worker_cluster
  from tfplace.models.registry import build_model
  graph = build_model("mlp_towers", num_towers=2, hidden=8, batch_size=4,
                      input_size=8, num_layers=1)
  cluster = make_worker_cluster(2)
  rng = np.random.default_rng(0)
  runs = [np.zeros(graph.num_ops, np.int32)] + [
      rng.integers(0, 2, size=graph.num_colocation_groups)[graph.group_of]
      .astype(np.int32) for _ in range(4)]
  # "Measured" = the simulator with known overheads: 1 ms per step and
  # 300 us per transfer on each end.
  truth = Calibration(compute_scale={"CPU": 2.0}, step_overhead_s=1e-3,
                      transfer_overhead_s={"CPU": 3e-4})
  sim = calibrated_simulator(graph, cluster, truth)
  measured = [(d, sim.simulate(d).step_time_s) for d in runs]
  search = OverheadSearch(transfer_overheads_s=(0.0, 1e-4, 3e-4, 1e-3),
                          latency_factors=(1.0,), overlap_latency=(False, True),
                          compute_factors=(0.25, 0.5, 1.0))
  # The op-record fit overstates compute 2x: the factor 0.5 corrects it.
  fit = fit_overheads(graph, cluster, Calibration(compute_scale={"CPU": 4.0}),
                      measured, search)
  assert fit.compute_scale == {"CPU": 2.0}
  assert fit.step_overhead_s == pytest.approx(1e-3)
  assert fit.transfer_overhead_s == {"CPU": 3e-4}
  assert not fit.overlap_latency
  # The one-device run has no transfers: its prediction is unchanged by them.
  fitted = calibrated_simulator(graph, cluster, fit)
  for d, m in measured:
    assert fitted.simulate(d).step_time_s == pytest.approx(m)


def test_fit_overheads_needs_runs():
  from tfplace.cost.calibrated import Calibration
  from tfplace.measurement.calibration_fit import fit_overheads
  from tfplace.measurement.local_cluster import make_worker_cluster
  with pytest.raises(MeasureError):
    fit_overheads(None, make_worker_cluster(2), Calibration(), [])
