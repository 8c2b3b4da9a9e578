"""Calibrations and measured op times."""

import dataclasses
import json

import numpy as np
import pytest

import tfplace  # noqa: F401
from tfplace.cost.analytical import AnalyticalConfig
from tfplace.cost.cluster import Device, Link, LinkSpec, make_cluster
from tfplace.cost.calibrated import (Calibration, CalibratedCostModel,
                                     OpTypeCost, apply_calibration)
from tfplace.errors import ClusterError
from tfplace.graph.op_graph import Op, OpGraph

UNIT = AnalyticalConfig(compute_efficiency={"CPU": 1.0, "GPU": 1.0},
                        memory_efficiency=1.0)


def cluster():
  cpu = Device("/device:CPU:0", "CPU", 1e9, 1e9, 1e12, launch_overhead_s=0.0)
  gpu = Device("/device:GPU:0", "GPU", 4e9, 1e10, 1e12, launch_overhead_s=0.0)
  return make_cluster("c", [cpu, gpu],
                      [Link(cpu.name, gpu.name, 1e-5, 1e10, "pcie")],
                      LinkSpec(1e-4, 1e9, "network"))


def graph():
  ops = [Op("a", "MatMul", output_bytes=(0,), flops=2e9),
         Op("b", "Conv2D", output_bytes=(0,), flops=4e9),
         Op("c", "NcclAllReduce", output_bytes=(0,), flops=4e9,
            kernels=frozenset({"GPU"}))]
  return OpGraph(ops, [], graph_def=None)


def test_calibrated_model_scales_by_device_and_op_type():
  cal = Calibration(compute_scale={"GPU": 2.0}, op_type_scale={"Conv2D": 3.0})
  s = CalibratedCostModel(cal, UNIT).op_costs(graph(), cluster()).compute_s
  assert s[0] == pytest.approx([2.0, 1.0])
  assert s[1] == pytest.approx([12.0, 6.0])


def test_apply_calibration_replaces_links_by_kind():
  cal = Calibration(links={"pcie": LinkSpec(2e-5, 5e9, "pcie"),
                           "network": LinkSpec(1e-3, 1e8, "network")},
                    launch_overhead_s={"GPU": 1e-5})
  c = apply_calibration(cluster(), cal)
  assert c.links[0].bandwidth == 5e9 and c.links[0].latency_s == 2e-5
  assert c.default_link.bandwidth == 1e8
  assert c.devices[1].launch_overhead_s == 1e-5
  assert c.devices[0].launch_overhead_s == 0.0


def test_a_loop_body_takes_its_types_loop_fit_first(tmp_path):
  # A type fitted on loop bodies (`loop_op_types`) costs a body row so; a
  # type fitted only at the top level costs it as before; the top-level
  # op of that type keeps its top-level fit.
  from tfplace.graph.op_graph import BodyOp, ControlFlowCost
  cal = dataclasses.replace(
      _new_calibration(), trace_excess_s={"CPU": 1e-6},
      op_types={"CPU": {"MatMul": OpTypeCost(2e-6, 1.5)}},
      loop_op_types={"CPU": {"MatMul": OpTypeCost(1e-6, 1.0),
                             "Merge": OpTypeCost(3e-7, 1.0)}})
  cluster = apply_calibration(_cpu_cluster(), cal)
  body = ControlFlowCost((BodyOp("while/MatMul", "MatMul", 4e6, 0, 10.0),
                          BodyOp("while/Merge", "Merge", 0.0, 0, 30.0)),
                         trip_count=10)
  seconds = CalibratedCostModel(cal, UNIT).body_seconds(body, cluster, 0)
  launch = 1e-6
  assert seconds[0] == pytest.approx(launch + 1e-6 + 4e6 / 4e9 - 1e-6)
  assert seconds[1] == pytest.approx(launch)  # not below the launch
  top = dataclasses.replace(cal, loop_op_types={})
  assert CalibratedCostModel(top, UNIT).body_seconds(
      body, cluster, 0)[0] == pytest.approx(
          launch + 2e-6 + 1.5 * 4e6 / 4e9 - 1e-6)
  path = str(tmp_path / "cal.json")
  cal.save(path)
  assert Calibration.load(path) == cal
  assert "loop_op_types" not in top.to_dict()  # Old files unchanged.


def test_calibration_round_trip(tmp_path):
  cal = Calibration(compute_scale={"GPU": 1.5}, op_type_scale={"Conv2D": 0.8},
                    launch_overhead_s={"CPU": 0.0},
                    links={"pcie": LinkSpec(2e-5, 9e9, "pcie")}, notes="fit")
  path = str(tmp_path / "cal.json")
  cal.save(path)
  assert Calibration.load(path) == cal


def test_benchmark_spread_round_trips_and_old_files_have_none(tmp_path):
  spread = {"compute": 1.39, "per_op": 1.52, "message": 1.33,
            "empty_step": 1.18}
  cal = Calibration(compute_scale={"CPU": 1.0}, benchmark_spread=spread)
  path = str(tmp_path / "cal.json")
  cal.save(path)
  assert Calibration.load(path).benchmark_spread == spread
  plain = Calibration(compute_scale={"CPU": 1.0})
  assert "benchmark_spread" not in plain.to_dict()  # Old files unchanged.
  assert Calibration.from_dict(plain.to_dict()).benchmark_spread == {}


@pytest.mark.parametrize("data", [
    {"compute_scale": {"GPU": 1.0}},                       # no format
    {"format": "tfplace.calibration/1", "benchmark_spread": {"compute": 0}},
    {"format": "tfplace.calibration/1", "compute_scale": {"GPU": 0}},
    {"format": "tfplace.calibration/1", "compute_scale": {"GPU": "x"}},
    {"format": "tfplace.calibration/1",
     "links": {"pcie": {"latency_s": 1e-5, "bandwidth": -1}}},
    {"format": "tfplace.calibration/1", "links": {"pcie": {"latency_s": 0}}},
])
def test_malformed_calibration_raises(tmp_path, data):
  path = tmp_path / "cal.json"
  path.write_text(json.dumps(data))
  with pytest.raises(ClusterError) as e:
    Calibration.load(str(path))
  assert str(path) in str(e.value)  # Which file (--calibration cluster.json).


def test_calibration_overheads_round_trip_and_apply(tmp_path):
  cal = Calibration(compute_scale={"CPU": 2.0},
                    transfer_overhead_s={"CPU": 2e-4}, step_overhead_s=1.5e-3)
  path = str(tmp_path / "cal.json")
  cal.save(path)
  back = Calibration.load(path)
  assert back.transfer_overhead_s == {"CPU": 2e-4}
  assert back.step_overhead_s == 1.5e-3
  c = apply_calibration(cluster(), back)
  assert [d.transfer_overhead_s for d in c.devices] == [2e-4, 0.0]
  assert c.step_overhead_s == 1.5e-3


def test_old_calibration_json_loads_with_zero_overheads(tmp_path):
  path = tmp_path / "old.json"
  path.write_text(json.dumps({"format": "tfplace.calibration/1",
                              "compute_scale": {"CPU": 2.0},
                              "launch_overhead_s": {"CPU": 1e-5},
                              "notes": "written before the overheads"}))
  cal = Calibration.load(str(path))
  assert cal.transfer_overhead_s == {} and cal.step_overhead_s == 0.0
  c = apply_calibration(cluster(), cal)
  assert c.step_overhead_s == 0.0
  assert [d.transfer_overhead_s for d in c.devices] == [0.0, 0.0]
  assert c.devices[0].launch_overhead_s == 1e-5


@pytest.mark.parametrize("field,value", [
    ("transfer_overhead_s", {"CPU": -1e-6}),
    ("transfer_overhead_s", {"CPU": float("nan")}),
    ("step_overhead_s", -1.0), ("step_overhead_s", float("nan"))])
def test_bad_calibration_overheads_raise(field, value):
  data = {"format": "tfplace.calibration/1", field: value}
  with pytest.raises(ClusterError):
    Calibration.from_dict(data)
  with pytest.raises(ClusterError):
    Calibration(**{field: value})


def _cpu_cluster(launch=1e-6):
  from tfplace.cost.cluster import Cluster
  devs = [Device(f"/job:worker/replica:0/task:{i}/device:CPU:0", "CPU", 1e9,
                 1e9, 1e12, launch_overhead_s=launch) for i in range(2)]
  return Cluster("w", tuple(devs), default_link=LinkSpec(1e-4, 1e9, "loopback"))


def _typed_graph():
  ops = [Op("mm", "MatMul", output_bytes=(0,), flops=2e9),
         Op("cv", "Conv2D", output_bytes=(0,), flops=4e9),
         Op("id", "Identity", output_bytes=(0,)),
         Op("odd", "Cumsum", output_bytes=(0,), flops=1e9)]
  return OpGraph(ops, [], graph_def=None)


def _new_calibration():
  from tfplace.cost.calibrated import OpTypeCost
  w0 = "/job:worker/replica:0/task:0/device:CPU:0"
  return Calibration(
      device_rates={"CPU": {"matmul_flops": 4e9, "conv_flops": 2e9,
                            "copy_bandwidth": 1e10}},
      launch_overhead_s={"CPU": 1e-6}, transfer_overhead_s={"CPU": 5e-5},
      step_overhead_s=3e-4, run_overhead_s={w0: 1e-4},
      links={"loopback": LinkSpec(2e-5, 2e9, "loopback")},
      overlap_latency=True, rendezvous_transfers=True,
      op_types={"CPU": {"MatMul": OpTypeCost(2e-6, 1.5, 10),
                        "Conv2D": OpTypeCost(0.0, 0.5, 4),
                        "Identity": OpTypeCost(3e-7, 1.0, 30)}})


def test_fitted_op_types_cost_launch_plus_fixed_plus_scaled_roofline():
  cal = _new_calibration()
  cluster = apply_calibration(_cpu_cluster(launch=9e-6), cal)
  assert cluster.devices[0].matmul_flops == 4e9
  assert cluster.devices[0].run_overhead_s == 1e-4
  assert cluster.devices[1].run_overhead_s == 0.0
  assert cluster.devices[1].launch_overhead_s == 1e-6
  assert cluster.rendezvous_transfers and cluster.overlap_latency
  s = CalibratedCostModel(cal, UNIT).op_costs(_typed_graph(), cluster).compute_s
  # MatMul: 1 us + 2 us + 1.5 x (2e9 / 4e9); Conv2D at the conv rate;
  # Identity: launch + fixed; Cumsum (unseen): the fitted kernel types'
  # median fixed part (1 us) and scale (1.0) on its roofline (matmul rate).
  assert s[0] == pytest.approx([1e-6 + 2e-6 + 0.75] * 2)
  assert s[1] == pytest.approx([1e-6 + 0.5 * 2.0] * 2)
  assert s[2] == pytest.approx([1.3e-6] * 2)
  assert s[3] == pytest.approx([1e-6 + 1e-6 + 0.25] * 2)


def test_an_unseen_type_costs_as_the_fitted_types_typically_do():
  from tfplace.cost.calibrated import OpTypeCost, unseen_type_cost
  fits = {"MatMul": OpTypeCost(2e-6, 1.5, 10), "Relu": OpTypeCost(1e-6, 3.0),
          "Conv2D": OpTypeCost(0.0, 0.5, 4), "Const": OpTypeCost(9.0, 9.0)}
  # Medians over the kernel types (Const's fit is left out).
  assert unseen_type_cost(fits) == OpTypeCost(1e-6, 1.5)
  assert unseen_type_cost({"Const": OpTypeCost(9.0, 9.0)}) is None
  # A transcendental type: the fitted transcendental types' medians, where
  # two or more were fitted.
  assert unseen_type_cost(fits, "Erfc") == OpTypeCost(1e-6, 1.5)
  curves = dict(fits, Exp=OpTypeCost(3e-6, 4.0), Tanh=OpTypeCost(1e-6, 2.0))
  assert unseen_type_cost(curves, "Erfc") == OpTypeCost(2e-6, 3.0)
  assert unseen_type_cost(curves, "Cumsum") == OpTypeCost(1e-6, 2.0)
  cal = dataclasses.replace(_new_calibration(), op_types={"CPU": fits})
  cluster = apply_calibration(_cpu_cluster(launch=9e-6), cal)
  ops = [Op("odd", "Cumsum", output_bytes=(0,), flops=1e9),
         Op("shape", "Shape", output_bytes=(0,)),
         Op("gpu_only", "NcclAllReduce", output_bytes=(0,), flops=1e9,
            kernels=frozenset({"GPU"}))]
  graph = OpGraph(ops, [], graph_def=None)
  s = CalibratedCostModel(cal, UNIT).op_costs(graph, cluster).compute_s
  assert s[0] == pytest.approx([1e-6 + 1e-6 + 1.5 * 0.25] * 2)
  assert s[1] == pytest.approx([1e-6] * 2)  # a trivial op: its launch
  assert np.isinf(s[2]).all()               # no kernel here
  # A scale given for the type, or for the device type, keeps the
  # analytical time it scales.
  for scaled in (dict(op_type_scale={"Cumsum": 2.0}),
                 dict(compute_scale={"CPU": 2.0})):
    s = CalibratedCostModel(dataclasses.replace(cal, **scaled),
                            UNIT).op_costs(graph, cluster).compute_s
    assert s[0] == pytest.approx([2.0 * (1e-6 + 0.25)] * 2)


def test_the_trace_excess_comes_off_every_op_down_to_the_launch_overhead(
    tmp_path):
  cal = dataclasses.replace(_new_calibration(), trace_excess_s={"CPU": 5e-7})
  cluster = apply_calibration(_cpu_cluster(launch=9e-6), cal)
  s = CalibratedCostModel(cal, UNIT).op_costs(_typed_graph(), cluster).compute_s
  # As in the test above, less 0.5 us; Identity (1.3 us) not below the
  # launch overhead (1 us).
  assert s[0] == pytest.approx([1e-6 + 2e-6 + 0.75 - 5e-7] * 2)
  assert s[2] == pytest.approx([1e-6] * 2)
  assert s[3] == pytest.approx([1e-6 + 1e-6 + 0.25 - 5e-7] * 2)
  cal.save(str(tmp_path / "cal.json"))
  assert Calibration.load(str(tmp_path / "cal.json")) == cal
  with pytest.raises(ClusterError, match="trace_excess_s"):
    dataclasses.replace(cal, trace_excess_s={"CPU": -1e-6})


def test_new_calibration_round_trips_and_old_files_still_load(tmp_path):
  cal = _new_calibration()
  path = str(tmp_path / "cal.json")
  cal.save(path)
  back = Calibration.load(path)
  assert back == cal
  assert back.seen("CPU", "MatMul") and not back.seen("GPU", "MatMul")
  old = tmp_path / "old.json"
  old.write_text(json.dumps({"format": "tfplace.calibration/1",
                             "compute_scale": {"CPU": 2.0}}))
  loaded = Calibration.load(str(old))
  assert loaded.op_types == {} and loaded.device_rates == {}
  assert loaded.run_overhead_s == {} and loaded.trace_excess_s == {}
  assert not loaded.rendezvous_transfers


def test_a_curve_interpolates_in_log_log_and_round_trips(tmp_path):
  from tfplace.cost.calibrated import OpTypeCost
  cost = OpTypeCost(9.0, 9.0, 6, curve_work_s=(1e-6, 1e-4),
                    curve_time_s=(2e-5, 2e-4))
  got = cost.seconds(np.array([0.0, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3]))
  # Below the first knot its time; between, the geometric mean at the
  # geometric middle; beyond the last, in proportion (2x its roofline).
  assert got == pytest.approx([2e-5, 2e-5, 2e-5, np.sqrt(2e-5 * 2e-4), 2e-4,
                               2e-3])
  cal = dataclasses.replace(_new_calibration(), op_types={"CPU": {
      "Conv2D": cost, "MatMul": OpTypeCost(2e-6, 1.5, 10)}})
  cal.save(str(tmp_path / "cal.json"))
  data = json.loads((tmp_path / "cal.json").read_text())
  assert data["op_types"]["CPU"]["Conv2D"]["curve_time_s"] == [2e-5, 2e-4]
  assert "curve_work_s" not in data["op_types"]["CPU"]["MatMul"]
  assert Calibration.load(str(tmp_path / "cal.json")) == cal


def test_strided_convolutions_take_their_own_cost_and_round_trip(tmp_path):
  from tfplace.cost.calibrated import STRIDED, OpTypeCost
  strided = OpTypeCost(0.0, 3.0, 4)
  cal = dataclasses.replace(_new_calibration(), op_types={"CPU": {
      "Conv2D": OpTypeCost(0.0, 0.5, 8, variants={STRIDED: strided}),
      "MatMul": OpTypeCost(0.0, 2.0, 10)}})
  ops = [Op("plain", "Conv2D", output_bytes=(0,), flops=4e9),
         Op("down", "Conv2D", output_bytes=(0,), flops=4e9, stride=2),
         Op("mm", "MatMul", output_bytes=(0,), flops=2e9, stride=2)]
  cluster = apply_calibration(_cpu_cluster(launch=9e-6), cal)
  s = CalibratedCostModel(cal, UNIT).op_costs(
      OpGraph(ops, [], graph_def=None), cluster).compute_s
  # 2 s of roofline at the conv rate: 0.5x plain, 3x strided; an op type
  # without a strided cost is costed as its type whatever its stride.
  assert s[0] == pytest.approx([1e-6 + 1.0] * 2)
  assert s[1] == pytest.approx([1e-6 + 6.0] * 2)
  assert s[2] == pytest.approx([1e-6 + 1.0] * 2)
  cal.save(str(tmp_path / "cal.json"))
  data = json.loads((tmp_path / "cal.json").read_text())
  # The JSON keeps the strided cost under its own key, as older files do.
  assert data["op_types"]["CPU"]["Conv2D"]["strided"]["scale"] == 3.0
  assert "variants" not in data["op_types"]["CPU"]["Conv2D"]
  assert Calibration.load(str(tmp_path / "cal.json")) == cal


def test_op_variants_take_their_own_cost_and_round_trip(tmp_path):
  from tfplace.cost.calibrated import OpTypeCost
  cal = dataclasses.replace(_new_calibration(), op_types={"CPU": {
      "Einsum": OpTypeCost(0.0, 0.5, 8, variants={
          "batched": OpTypeCost(0.0, 4.0, 8)})}})
  ops = [Op("project", "Einsum", output_bytes=(0,), flops=2e9),
         Op("scores", "Einsum", output_bytes=(0,), flops=2e9,
            variant="batched"),
         Op("other", "Einsum", output_bytes=(0,), flops=2e9,
            variant="channels_first")]
  cluster = apply_calibration(_cpu_cluster(launch=9e-6), cal)
  s = CalibratedCostModel(cal, UNIT).op_costs(
      OpGraph(ops, [], graph_def=None), cluster).compute_s
  # 0.5 s of roofline at the matmul rate: 0.5x plain, 4x batched; a
  # variant without a cost of its own is costed as the plain executions.
  assert s[0] == pytest.approx([1e-6 + 0.25] * 2)
  assert s[1] == pytest.approx([1e-6 + 2.0] * 2)
  assert s[2] == pytest.approx([1e-6 + 0.25] * 2)
  cal.save(str(tmp_path / "cal.json"))
  data = json.loads((tmp_path / "cal.json").read_text())
  assert data["op_types"]["CPU"]["Einsum"]["variants"]["batched"][
      "scale"] == 4.0
  assert Calibration.load(str(tmp_path / "cal.json")) == cal


def test_each_matrix_product_costs_its_fitted_time_and_round_trips(
    tmp_path):
  from tfplace.cost.calibrated import OpTypeCost
  curve = OpTypeCost(0.0, 1.0, 6, curve_work_s=(0.1, 1.0),
                     curve_time_s=(0.2, 2.0), per_product_s=0.01)
  cal = dataclasses.replace(_new_calibration(), op_types={"CPU": {
      "BatchMatMulV2": OpTypeCost(0.0, 0.5, 8, per_product_s=0.001),
      "Einsum": curve}})
  ops = [Op("one", "BatchMatMulV2", output_bytes=(0,), flops=2e9),
         Op("many", "BatchMatMulV2", output_bytes=(0,), flops=2e9,
            matrix_products=64),
         Op("curve", "Einsum", output_bytes=(0,), flops=2e9,
            matrix_products=3)]
  cluster = apply_calibration(_cpu_cluster(launch=9e-6), cal)
  s = CalibratedCostModel(cal, UNIT).op_costs(
      OpGraph(ops, [], graph_def=None), cluster).compute_s
  # 0.5 s of roofline: 0.25 s scaled, plus 1 ms per product; on the curve
  # 1.0 s, plus 10 ms per product.
  assert s[0] == pytest.approx([1e-6 + 0.25 + 0.001] * 2)
  assert s[1] == pytest.approx([1e-6 + 0.25 + 0.064] * 2)
  assert s[2] == pytest.approx([1e-6 + 1.0 + 0.03] * 2)
  cal.save(str(tmp_path / "cal.json"))
  data = json.loads((tmp_path / "cal.json").read_text())
  assert data["op_types"]["CPU"]["BatchMatMulV2"]["per_product_s"] == 0.001
  assert Calibration.load(str(tmp_path / "cal.json")) == cal
  # A type without a cost per product writes no key: files stay as they were.
  plain = dataclasses.replace(cal, op_types={"CPU": {
      "MatMul": OpTypeCost(0.0, 0.5, 8)}})
  plain.save(str(tmp_path / "plain.json"))
  assert "per_product_s" not in json.loads(
      (tmp_path / "plain.json").read_text())["op_types"]["CPU"]["MatMul"]


@pytest.mark.parametrize("work,time", [
    ((1e-6,), (1e-5,)),  # one knot
    ((1e-6, 1e-5), (1e-5,)),  # unequal lengths
    ((1e-5, 1e-6), (1e-5, 2e-5)),  # work not increasing
    ((1e-6, 1e-5), (2e-5, 1e-5)),  # time decreasing
    ((0.0, 1e-5), (1e-5, 2e-5)),  # not positive
])
def test_bad_curves_raise(work, time):
  from tfplace.cost.calibrated import OpTypeCost
  with pytest.raises(ClusterError, match="curve"):
    OpTypeCost(0.0, 1.0, 2, curve_work_s=work, curve_time_s=time)


@pytest.mark.parametrize("data", [
    {"device_rates": {"CPU": {"matmul_flops": -1.0}}},
    {"device_rates": {"CPU": {"warp_speed": 1.0}}},
    {"op_types": {"CPU": {"MatMul": {"fixed_s": -1e-6, "scale": 1.0}}}},
    {"op_types": {"CPU": {"MatMul": {"fixed_s": 1e-6, "scale": 0.0}}}},
    {"op_types": {"CPU": {"MatMul": {"scale": 1.0}}}},
    {"op_types": {"CPU": {"MatMul": {"fixed_s": 0.0, "scale": 1.0,
                                     "per_product_s": -1e-6}}}},
    {"run_overhead_s": {"/cpu:0": float("nan")}},
    {"rendezvous_transfers": "yes"},
])
def test_malformed_new_fields_raise(data):
  with pytest.raises(ClusterError):
    Calibration.from_dict({"format": "tfplace.calibration/1", **data})


def test_coverage_share_on_a_hand_made_case():
  from tfplace.cost.calibrated import calibration_coverage
  cal = _new_calibration()
  cluster = apply_calibration(_cpu_cluster(), cal)
  graph = _typed_graph()
  costs = CalibratedCostModel(cal, UNIT).op_costs(graph, cluster)
  cov = calibration_coverage(graph, cluster, cal, costs,
                             np.array([0, 1, 0, 1]))
  c = costs.compute_s
  total = c[0, 0] + c[1, 1] + c[2, 0] + c[3, 1]
  assert cov.op_seconds == pytest.approx(total)
  assert cov.uncalibrated_share == pytest.approx(c[3, 1] / total)
  assert list(cov.unseen) == ["Cumsum"]
  assert "Cumsum" in cov.describe() and "%" in cov.describe()
  # A calibration that saw nothing: everything rests on unseen types.
  none = calibration_coverage(graph, cluster, Calibration(), costs)
  assert none.uncalibrated_share == pytest.approx(1.0)


def _gpu_cluster():
  from tfplace.cost.cluster import Cluster
  devs = [Device("/job:localhost/replica:0/task:0/device:CPU:0", "CPU", 1e9,
                 1e9, 1e12, launch_overhead_s=1e-6),
          Device("/job:localhost/replica:0/task:0/device:GPU:0", "GPU", 1e9,
                 1e9, 1e12, launch_overhead_s=5e-6)]
  return Cluster("local", tuple(devs), default_link=LinkSpec(0, 1e10, "pcie"))


def _launch_bound_calibration():
  from tfplace.cost.calibrated import OpTypeCost
  gpu = {"conv": 2e-5, "matmul": 1e-5, "elementwise": 4e-6,
         "no_kernel": 5e-7}
  return dataclasses.replace(
      _new_calibration(), launch_s={"GPU": gpu}, dispatch_s={"GPU": 1e-6},
      stall_s={"GPU": 3e-4}, kernel_free={"GPU": ("Cumsum",)},
      trace_excess_s={"CPU": 5e-7, "GPU": 1e-3},
      op_types={**_new_calibration().op_types,
                "GPU": {"MatMul": OpTypeCost(1e-6, 1e-5, 10),
                        "Conv2D": OpTypeCost(0.0, 1e-3, 10)}})


def test_a_launch_bound_op_costs_the_longer_of_its_launch_and_its_kernel(
    tmp_path):
  cal = _launch_bound_calibration()
  cluster = apply_calibration(_gpu_cluster(), cal)
  # The stall is a cost of each step that uses the GPU.
  assert cluster.devices[1].run_overhead_s == pytest.approx(3e-4)
  assert cluster.devices[0].run_overhead_s == 0.0
  ops = [Op("mm", "MatMul", output_bytes=(0,), flops=2e9),
         Op("big", "Conv2D", output_bytes=(0,), flops=4e9),
         Op("small", "Conv2D", output_bytes=(0,), flops=4e3),
         Op("id", "Identity", output_bytes=(0,)),
         Op("odd", "Cumsum", output_bytes=(0,), flops=1e9),
         Op("add", "AddV2", output_bytes=(0,), flops=2e9)]
  s = CalibratedCostModel(cal, UNIT).op_costs(
      OpGraph(ops, [], graph_def=None), cluster).compute_s[:, 1]
  d = 1e-6  # The dispatch, on every op.
  # MatMul: its kernel fit 1 us + 1e-5 x 2 s of roofline = 21 us, over
  # the matmul launch (10 us).
  assert s[0] == pytest.approx(d + 1e-6 + 1e-5 * 2.0)
  # A large convolution is kernel-bound (1 ms x 4), a small one
  # launch-bound (20 us).
  assert s[1] == pytest.approx(d + 1e-3 * 4.0)
  assert s[2] == pytest.approx(d + 2e-5)
  # Identity and a type that ran no kernel in calibration: the kernel-free
  # launch, whatever their roofline; no trace excess comes off.
  assert s[3] == pytest.approx(d + 5e-7)
  assert s[4] == pytest.approx(d + 5e-7)
  # An unseen type with a kernel: the element-wise launch or its roofline
  # (2 s here), the longer.
  assert s[5] == pytest.approx(d + 2.0)
  # The CPU keeps the traced fit and its trace excess.
  assert CalibratedCostModel(cal, UNIT).op_costs(
      _typed_graph(), cluster).compute_s[0, 0] == pytest.approx(
          1e-6 + 2e-6 + 0.75 - 5e-7)
  path = str(tmp_path / "cal.json")
  cal.save(path)
  assert Calibration.load(path) == cal


@pytest.mark.parametrize("launch, match", [
    ({"conv": 1e-5}, "needs the 'elementwise' kind"),
    ({"elementwise": 1e-5, "warp": 1e-6}, "unknown launch kinds"),
    ({"elementwise": -1e-5}, "launch_s"),
])
def test_bad_launch_costs_raise(launch, match):
  with pytest.raises(ClusterError, match=match):
    Calibration(launch_s={"GPU": launch})
  with pytest.raises(ClusterError, match="stall_s"):
    Calibration(stall_s={"GPU": float("nan")})


def test_a_loop_body_costs_its_ops_as_fitted_where_their_types_were_seen():
  # A While whose body runs 10 MatMuls (fitted: 2 us + 1.5x roofline) and
  # 30 Merges (unseen: analytical, the launch overhead) per run: it costs
  # its launch plus each execution as that, and the coverage counts only
  # the Merges' share as unseen.
  from tfplace.cost.calibrated import calibration_coverage
  from tfplace.graph.op_graph import BodyOp, ControlFlowCost
  cal = dataclasses.replace(_new_calibration(), trace_excess_s={"CPU": 1e-6})
  cluster = apply_calibration(_cpu_cluster(), cal)
  body = ControlFlowCost((BodyOp("while/MatMul", "MatMul", 4e6, 0, 10.0),
                          BodyOp("while/Merge", "Merge", 0.0, 0, 30.0)),
                         trip_count=10)
  graph = OpGraph([Op("loop", "While", output_bytes=(0,), flops=body.flops,
                      body=body)], [], graph_def=None)
  costs = CalibratedCostModel(cal, UNIT).op_costs(graph, cluster)
  launch = 1e-6
  matmul = launch + 2e-6 + 1.5 * (4e6 / 4e9) - 1e-6  # less the excess
  # The While itself then loses the excess once, as every op does.
  expected = launch + 10 * matmul + 30 * launch - 1e-6
  assert costs.compute_s[0, 0] == pytest.approx(expected)
  cov = calibration_coverage(graph, cluster, cal, costs, np.array([0]))
  merges = 30 * launch / (10 * matmul + 30 * launch)
  assert cov.uncalibrated_share == pytest.approx(merges)
  assert list(cov.unseen) == ["Merge"]
  # A calibration that fitted none of its body's types: analytical, and
  # the whole loop unseen under its own type.
  none = dataclasses.replace(cal, op_types={"CPU": {}})
  plain = CalibratedCostModel(none, UNIT).op_costs(graph, cluster)
  assert plain.compute_s[0, 0] < costs.compute_s[0, 0]
  assert list(calibration_coverage(graph, cluster, none, plain,
                                   np.array([0])).unseen) == ["While"]
