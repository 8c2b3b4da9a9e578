"""Tests for tfplace.experiments.op_type_errors."""

import numpy as np
import pytest

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.cost.analytical import AnalyticalCostModel
from tfplace.cost.calibrated import Calibration, OpTypeCost, apply_calibration
from tfplace.cost.cluster import Cluster, Device, LinkSpec
from tfplace.experiments import op_type_errors
from tfplace.graph.op_graph import Op, OpGraph
from tfplace.measurement.batch import MeasureOutcome
from tfplace.measurement.timing import OpRecord, StepTiming
from tfplace.placement import Placement

W = [f"/job:worker/replica:0/task:{i}/device:CPU:0" for i in range(2)]
TRACER_S = 5e-7


def _cluster():
  devs = tuple(Device(w, "CPU", 1e9, 1e9, 1e12, launch_overhead_s=1e-6)
               for w in W)
  return Cluster("w", devs, default_link=LinkSpec(1e-4, 1e9, "loopback"))


def _graph():
  return OpGraph([Op("mm1", "MatMul", output_bytes=(0,), flops=2e8),
                  Op("mm2", "MatMul", output_bytes=(0,), flops=4e8),
                  Op("id", "Identity", output_bytes=(0,))], [],
                 graph_def=None)


def _calibration():
  return Calibration(
      device_rates={"CPU": {"matmul_flops": 4e9, "conv_flops": 2e9,
                            "copy_bandwidth": 1e10}},
      launch_overhead_s={"CPU": 1e-6}, transfer_overhead_s={"CPU": 5e-5},
      step_overhead_s=3e-4, run_overhead_s={W[0]: 1e-4},
      links={"loopback": LinkSpec(2e-5, 2e9, "loopback")},
      overlap_latency=True, rendezvous_transfers=True,
      # The trace excess is taken off the costs: not off the comparison.
      trace_excess_s={"CPU": 4e-7},
      op_types={"CPU": {"MatMul": OpTypeCost(0.0, 1.5, 10),
                        "Identity": OpTypeCost(3e-7, 1.0, 30)}})


def _timing(graph, device, seconds):
  """One traced step: op i took seconds[i] plus the tracer's cost, in
  turn (no two at once)."""
  traced = np.asarray(seconds) + TRACER_S
  starts = np.concatenate([[0.0], np.cumsum(traced)[:-1]])
  records = tuple(OpRecord(op.name, device, float(t), float(d))
                  for op, t, d in zip(graph.ops, starts, traced))
  step = float(sum(seconds))
  return StepTiming(step, step, step, 0.0, 0.0, (step,), op_records=records)


def test_each_type_is_summed_beside_its_fit_in_the_fits_terms():
  graph, cluster, cal = _graph(), _cluster(), _calibration()
  work = AnalyticalCostModel().work_seconds(
      graph, apply_calibration(cluster, cal))[:, 0]
  # The MatMuls ran at their roofline (the fit says 1.5x), Identity 2 us.
  timing = _timing(graph, W[0], [work[0], work[1], 2e-6])
  rows = op_type_errors.op_type_errors(graph, cluster, cal, timing,
                                       {W[0]: TRACER_S})
  by_type = {r.op_type: r for r in rows}
  assert by_type["MatMul"].ops == 2
  assert by_type["MatMul"].traced_s == pytest.approx(work[0] + work[1])
  assert by_type["MatMul"].predicted_s == pytest.approx(
      1.5 * (work[0] + work[1]))
  assert by_type["Identity"].traced_s == pytest.approx(2e-6)
  assert by_type["Identity"].predicted_s == pytest.approx(3e-7 + work[2])
  assert rows[0].op_type == "MatMul"  # The largest miss first.


def test_only_measured_one_device_runs_count():
  graph, cluster, cal = _graph(), _cluster(), _calibration()
  timing = _timing(graph, W[0], [1e-4, 2e-4, 1e-6])
  one = Placement({op.name: W[0] for op in graph.ops})
  split = Placement({"mm1": W[0], "mm2": W[1], "id": W[0]})
  runs = op_type_errors.one_device_errors(
      graph, cluster, cal, [("single", one), ("split", split),
                            ("failed", one)],
      [MeasureOutcome("a", timing), MeasureOutcome("b", timing),
       MeasureOutcome("c", None, error="died")], {W[0]: TRACER_S})
  assert len(runs) == 1 and {r.op_type for r in runs[0]} == {
      "MatMul", "Identity"}


def test_the_table_keeps_each_graphs_largest_misses():
  row = op_type_errors.OpTypeError
  runs = {"g": [(row("MatMul", "", 2, 1e-3, 2e-3),
                 row("Identity", "", 5, 1e-5, 1e-5)),
                (row("MatMul", "", 2, 1e-3, 3e-3),)]}
  table = op_type_errors.summary_table(runs, top=1)
  lines = table.strip().splitlines()
  assert len(lines) == 3
  # Medians over the two runs: traced 1.0 ms, predicted 2.5 ms.
  assert lines[2] == "| g | MatMul | - | 2 | 1.000 | 2.500 | 2.50 | 2 |"
