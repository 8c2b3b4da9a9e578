"""Tests for the calibration fits (tfplace.measurement.calibration_fit) and
the link fit (comm_benchmark)."""

import dataclasses

import numpy as np
import pytest

import tfplace  # noqa: F401
from tfplace.errors import MeasureError
from tfplace.cost.calibrated import STRIDED, Calibration, OpTypeCost
from tfplace.measurement import calibration_fit as fit
from tfplace.measurement.calibration_fit import FitBounds, OpSample
from tfplace.measurement.cluster_benchmark import (ClusterBenchmark,
                                                   DeviceBenchmark,
                                                   LinkBenchmark)
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


def _samples(fixed, scale, works, op_type="MatMul", device_type="CPU",
             noise=0.0, seed=0):
  rng = np.random.default_rng(seed)
  return [OpSample(op_type, device_type, w,
                   (fixed + scale * w) * (1 + noise * rng.standard_normal()))
          for w in works]


WORKS = np.geomspace(1e-6, 1e-3, 12)


def test_fit_recovers_fixed_and_scale():
  got = fit.fit_op_type(_samples(3e-6, 1.7, WORKS))
  assert got.fixed_s == pytest.approx(3e-6, rel=0.02)
  assert got.scale == pytest.approx(1.7, rel=0.02)
  assert got.samples == 12


def test_fit_recovers_factors_from_noisy_samples_per_type():
  samples = (_samples(2e-6, 1.3, WORKS, "MatMul", noise=0.05, seed=1)
             + _samples(0.5e-6, 0.2, WORKS, "Mul", noise=0.05, seed=2)
             + _samples(1e-6, 1.0, WORKS, "MatMul", "GPU", seed=3))
  fits = fit.fit_op_types(samples)
  assert set(fits) == {"CPU", "GPU"} and set(fits["CPU"]) == {"MatMul", "Mul"}
  assert fits["CPU"]["MatMul"].scale == pytest.approx(1.3, rel=0.1)
  assert fits["CPU"]["MatMul"].fixed_s == pytest.approx(2e-6, rel=0.3)
  assert fits["CPU"]["Mul"].scale == pytest.approx(0.2, rel=0.1)
  assert fits["GPU"]["MatMul"].scale == pytest.approx(1.0, rel=0.02)


def test_convolutions_take_the_scale_where_their_work_is():
  # Many small executions at 3x their roofline beyond a 20 us fixed cost,
  # a few large ones at 1.05x: the executions weigh by their work.
  small = [(w, 20e-6 + 3.0 * w) for w in np.linspace(1e-6, 2e-5, 12)]
  large = [(w, 20e-6 + 1.05 * w) for w in (5e-3, 1e-2, 2e-2)]
  for op_type in ("Conv2D", "MatMul"):
    samples = [OpSample(op_type, "CPU", w, m) for w, m in small + large]
    plain = fit.fit_op_type(samples)
    got = fit.fit_op_types(samples)["CPU"][op_type]
    assert got.fixed_s == plain.fixed_s
    if op_type == "Conv2D":
      assert plain.scale > 1.1  # the log-ratio fit leans to the many
      assert got.scale == pytest.approx(1.05, rel=0.01)
    else:
      assert got == plain


def test_measured_curve_by_hand():
  # Seven executions, three per knot: knots at the median work and time of
  # (1, 2, 4), (8, 16, 32) and (64); the times made non-decreasing.
  work = np.array([64.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0]) * 1e-6
  measured = np.array([70.0, 30.0, 20.0, 10.0, 10.0, 18.0, 40.0]) * 1e-6
  knots_work, knots_time = fit.measured_curve(work, measured)
  assert knots_work == pytest.approx([2e-6, 16e-6, 64e-6])
  assert knots_time == pytest.approx([20e-6, 20e-6, 70e-6])
  # Equal work in two bins gives one knot; one knot is no curve.
  assert fit.measured_curve(np.full(6, 1e-6), np.full(6, 1e-5)) == ((), ())
  assert fit.measured_curve(np.array([1e-6, 2e-6]), np.ones(2)) == ((), ())


def test_few_executions_still_give_three_knots():
  # Three sizes, each executed twice: two per knot, one knot per size (with
  # three per knot the middle size would be lost between two knots).
  work = np.array([1.0, 1.0, 100.0, 100.0, 1000.0, 1000.0]) * 1e-6
  measured = np.array([20.0, 22.0, 200.0, 180.0, 1100.0, 1200.0]) * 1e-6
  knots_work, knots_time = fit.measured_curve(work, measured)
  assert knots_work == pytest.approx([1e-6, 1e-4, 1e-3])
  assert knots_time == pytest.approx([np.sqrt(20 * 22) * 1e-6,
                                      np.sqrt(200 * 180) * 1e-6,
                                      np.sqrt(1100 * 1200) * 1e-6])


def test_strided_convolutions_get_a_curve_of_their_own():
  # The plain executions take 2x their roofline, the strided ones 5x: the
  # type's curve follows all of them, the strided curve the strided ones.
  work = np.geomspace(1e-5, 1e-3, 9)
  samples = ([OpSample("Conv2DBackpropInput", "CPU", w, 2.0 * w)
              for w in work] +
             [OpSample("Conv2DBackpropInput", "CPU", w, 5.0 * w, strided=True)
              for w in work[::2]])
  got = fit.fit_op_types(samples)["CPU"]["Conv2DBackpropInput"]
  assert got.samples == 14 and got.variants[STRIDED].samples == 5
  middle = np.array([work[3]])
  assert got.variants[STRIDED].seconds(middle) == pytest.approx(5.0 * middle)
  assert 2.0 * middle[0] <= got.seconds(middle)[0] < 5.0 * middle[0]
  # Without strided executions, or with only strided ones, one curve.
  plain = fit.fit_op_types(samples[:9])["CPU"]["Conv2DBackpropInput"]
  assert STRIDED not in plain.variants and plain.curve_work_s
  only = fit.fit_op_types(samples[9:])["CPU"]["Conv2DBackpropInput"]
  assert STRIDED not in only.variants
  assert only.seconds(middle) == pytest.approx(5.0 * middle)


def test_narrow_window_filter_gradients_get_a_curve_of_their_own():
  # Plain filter gradients take 1.2x their roofline, narrow-window ones 3x:
  # the type's curve follows the plain executions only, the variant's the
  # narrow ones; with strided executions too, a strided op takes theirs.
  work = np.geomspace(1e-5, 1e-3, 9)
  op_type = "Conv2DBackpropFilter"
  samples = ([OpSample(op_type, "CPU", w, 1.2 * w) for w in work] +
             [OpSample(op_type, "CPU", w, 3.0 * w, variant="narrow_window")
              for w in work])
  got = fit.fit_op_types(samples)["CPU"][op_type]
  assert set(got.variants) == {"narrow_window"} and got.samples == 9
  middle = np.array([work[4]])
  assert got.seconds(middle) == pytest.approx(1.2 * middle)
  narrow = got.for_op(False, "narrow_window")
  assert narrow.samples == 9
  assert narrow.seconds(middle) == pytest.approx(3.0 * middle)
  strided = samples + [OpSample(op_type, "CPU", w, 5.0 * w, strided=True)
                       for w in work[::2]]
  got = fit.fit_op_types(strided)["CPU"][op_type]
  assert set(got.variants) == {STRIDED, "narrow_window"}
  assert got.for_op(True, "narrow_window") is got.variants[STRIDED]
  # Narrow ones alone: one curve, theirs.
  only = fit.fit_op_types(samples[9:])["CPU"][op_type]
  assert not only.variants
  assert only.seconds(middle) == pytest.approx(3.0 * middle)


def test_op_variants_get_fits_of_their_own():
  # Plain einsums take 1x their roofline plus 5 us, batched ones 5x: each
  # kind gets its own fit; the type's fit is the plain executions'.
  work = np.geomspace(1e-6, 1e-3, 8)
  samples = ([OpSample("Einsum", "CPU", w, 5e-6 + w) for w in work] +
             [OpSample("Einsum", "CPU", w, 5e-6 + 5.0 * w, variant="batched")
              for w in work])
  got = fit.fit_op_types(samples)["CPU"]["Einsum"]
  assert got.samples == 8 and set(got.variants) == {"batched"}
  assert got.variants["batched"].samples == 8
  assert (got.fixed_s, got.scale) == pytest.approx((5e-6, 1.0), rel=0.05)
  batched = got.variants["batched"]
  assert (batched.fixed_s, batched.scale) == pytest.approx((5e-6, 5.0),
                                                           rel=0.05)
  assert got.for_op(False, "batched") is batched
  assert got.for_op(False, "channels_first") is got
  # One kind alone: one fit, no variants.
  only = fit.fit_op_types(samples[8:])["CPU"]["Einsum"]
  assert not only.variants and only.scale == pytest.approx(5.0, rel=0.05)


def test_a_batched_type_gets_a_cost_per_matrix_product():
  # 0.5 us per product, 1 us fixed, 3x the roofline: the small products'
  # count sets their time, the large ones' work theirs. A fit without the
  # products charges the few large products' work to the many small ones.
  rng = np.random.default_rng(0)
  cases = [(w, n) for w in np.geomspace(1e-7, 1e-4, 6) for n in (4, 32, 64)]
  samples = [OpSample("BatchMatMulV2", "CPU", w, 1e-6 + 5e-7 * n + 3.0 * w,
                      matrix_products=n) for w, n in cases]
  rng.shuffle(samples)
  got = fit.fit_op_type(samples)
  assert got.per_product_s == pytest.approx(5e-7, rel=0.05)
  assert (got.fixed_s, got.scale) == pytest.approx((1e-6, 3.0), rel=0.05)
  assert got.seconds(np.array([1e-5]), 64) == pytest.approx(
      1e-6 + 3.2e-5 + 3e-5, rel=0.02)
  # One product per execution everywhere: no cost per product.
  assert fit.fit_op_type(_samples(3e-6, 1.7, WORKS)).per_product_s == 0.0


def test_convolutions_get_their_measured_curve():
  # A bend no fixed part and scale follow: 20 us flat, then 2x the
  # roofline, then 1x. The curve goes through the middle of each bin.
  work = np.geomspace(1e-7, 1e-2, 15)
  measured = np.maximum(20e-6, np.where(work < 1e-3, 2.0 * work, work))
  for op_type in ("Conv2DBackpropInput", "Relu"):
    samples = [OpSample(op_type, "CPU", w, m) for w, m in zip(work,
                                                              measured)]
    got = fit.fit_op_types(samples)["CPU"][op_type]
    if op_type == "Relu":
      assert got.curve_work_s == ()
      continue
    assert len(got.curve_work_s) == 5
    middle = work[1::3]
    assert got.seconds(middle) == pytest.approx(measured[1::3])
    linear = got.fixed_s + got.scale * middle
    assert np.abs(np.log(linear / measured[1::3])).max() > 0.3


def test_one_size_goes_to_the_fixed_part_when_slower_than_the_roofline():
  # One size only: fixed and scale cannot be told apart; alone, the prior
  # keeps scale 1 and the fixed part takes the rest (`fit_op_types` bounds
  # that fixed part: the next test).
  got = fit.fit_op_type([OpSample("Relu", "CPU", 2e-6, 5e-6)] * 5)
  assert got.scale == pytest.approx(1.0, rel=0.05)
  assert got.fixed_s == pytest.approx(3e-6, rel=0.05)


def test_a_type_of_one_size_takes_the_spanning_types_median_fixed_part():
  # Adam's dense update of an embedding table, one size: 61 us traced at 12
  # us of roofline. Alone it fits a 49 us fixed part, which a 0.1 us
  # moving-average update of the same type would be charged.
  spanning = (_samples(3e-6, 1.5, WORKS, "MatMul")
              + _samples(4e-6, 2.0, WORKS, "Mul")
              + _samples(6e-6, 1.2, WORKS, "Mean"))
  update = [OpSample("AssignSubVariableOp", "CPU", 12e-6, 61e-6)] * 4
  tiny = [OpSample("Unique", "CPU", 9e-8, 12e-6)] * 4
  assert fit.fit_op_type(update).fixed_s > 40e-6
  fits = fit.fit_op_types(spanning + update + tiny)["CPU"]
  got = fits["AssignSubVariableOp"]
  assert got.fixed_s <= 4e-6 * 1.05
  assert got.fixed_s + got.scale * 12e-6 == pytest.approx(61e-6, rel=0.05)
  # Work below the tracer's resolution shows no rate: its time stays fixed.
  assert fits["Unique"].fixed_s == pytest.approx(12e-6, rel=0.05)
  assert fits["Unique"].scale == 1.0
  # Executions 2x apart or more tell the two apart: left as fitted.
  two = [OpSample("AssignSubVariableOp", "CPU", w, 3e-5 + 2.5 * w)
         for w in (6e-6, 12e-6, 24e-6)]
  got = fit.fit_op_types(spanning + two)["CPU"]["AssignSubVariableOp"]
  assert got == fit.fit_op_type(two) and got.fixed_s > 2e-5
  # With no type that spans sizes there is nothing to bound it by.
  alone = fit.fit_op_types(update)["CPU"]["AssignSubVariableOp"]
  assert alone == fit.fit_op_type(update)


def test_work_below_the_tracers_resolution_fits_no_scale():
  # A 10-class softmax: 0.02-0.04 us of roofline work, 5-36 us measured,
  # the slower ones (by chance) the larger. Every execution's time is its
  # fixed part; a scale fitted to that noise (115 once; 627 here before)
  # would multiply a 1000-class softmax. It stays the roofline's.
  works = np.linspace(2e-8, 4e-8, 14)
  samples = [OpSample("SparseSoftmaxCrossEntropyWithLogits", "CPU", w, t)
             for w, t in zip(works, np.linspace(5e-6, 36e-6, 14))]
  got = fit.fit_op_type(samples)
  assert got.scale == 1.0
  assert 5e-6 < got.fixed_s < 36e-6
  # With some work above the resolution the scale is fitted.
  more = samples + [OpSample("SparseSoftmaxCrossEntropyWithLogits", "CPU",
                             w, 10e-6 + 12.0 * w) for w in (2e-6, 8e-6, 3e-5)]
  assert fit.fit_op_type(more).scale > 5.0


def _in_bounds(got, bounds, samples):
  work = np.array([s.work_s for s in samples])
  measured = np.array([s.measured_s for s in samples])
  small = measured[work <= np.median(work)]
  assert 0.0 <= got.fixed_s <= bounds.max_fixed_s
  assert got.fixed_s <= max(0.0, small.mean()) + 1e-15
  assert bounds.min_scale <= got.scale <= bounds.max_scale
  assert np.isfinite(got.fixed_s) and np.isfinite(got.scale)


@pytest.mark.parametrize("case", [
    "zeros", "huge_outliers", "no_work", "one_sample", "overhead_bait",
    "faster_than_light", "slower_than_everything"])
def test_parameters_stay_in_physical_bounds_on_adversarial_data(case):
  bounds = FitBounds()
  works = list(WORKS)
  if case == "zeros":  # the tracer's resolution: every op took 0 us
    samples = [OpSample("Add", "CPU", w, 0.0) for w in works]
  elif case == "huge_outliers":
    samples = _samples(1e-6, 1.0, works) + [OpSample("Add", "CPU", 1e-6, 5.0)]
  elif case == "no_work":  # a trivial op type
    samples = [OpSample("Identity", "CPU", 0.0, m) for m in (1e-6, 3e-6)]
  elif case == "one_sample":
    samples = [OpSample("Add", "CPU", 1e-5, 2e-5)]
  elif case == "overhead_bait":
    # Tiny ops take nothing, big ones take long: a large fixed cost would
    # fit the big ones, and must not be taken (it would absorb compute).
    samples = ([OpSample("Conv2D", "CPU", 1e-7, 1e-7)] * 6
               + [OpSample("Conv2D", "CPU", 1e-4, 2e-3)] * 2)
  elif case == "faster_than_light":
    samples = [OpSample("Add", "CPU", w, w * 1e-4) for w in works]
  else:
    samples = [OpSample("Add", "CPU", w, w * 1e6) for w in works]
  got = fit.fit_op_type(samples, bounds)
  _in_bounds(got, bounds, samples)
  if case == "overhead_bait":
    assert got.fixed_s <= 1e-7 + 1e-12
    assert got.scale > 2  # the big ones' time went to the compute
  if case == "faster_than_light":
    assert got.scale == pytest.approx(bounds.min_scale)
  if case == "slower_than_everything":
    assert got.scale == pytest.approx(bounds.max_scale)


def test_fit_needs_samples():
  with pytest.raises(MeasureError):
    fit.fit_op_types([])
  with pytest.raises(MeasureError):
    fit.fit_op_type([])


def _bench(devices=("/job:worker/replica:0/task:0/device:CPU:0",
                    "/job:worker/replica:0/task:1/device:CPU:0")):
  devs = tuple(DeviceBenchmark(d, matmul_flops=1e11 * (1 + i),
                               conv_flops=5e10, copy_bandwidth=1e10,
                               op_overhead_s=2e-7, traced_op_s=5e-7,
                               empty_step_s=4e-4 + 3e-4 * i)
               for i, d in enumerate(devices))
  links = tuple(LinkBenchmark(a, b, message_overhead_s=5e-5, latency_s=2e-5,
                              bandwidth=1e9, hop_s=1.202e-4)
                for a in devices for b in devices if a != b)
  return ClusterBenchmark(devs, links, empty_step_s=8e-4)


def test_calibration_from_benchmark_holds_the_measured_figures(tmp_path):
  from tfplace.measurement.local_cluster import make_worker_cluster
  cluster = make_worker_cluster(2)
  cal = fit.calibration_from_benchmark(
      _bench(), cluster, {"CPU": {"MatMul": OpTypeCost(1e-6, 1.2, 9)}})
  assert cal.device_rates["CPU"] == {"matmul_flops": 1.5e11,
                                     "conv_flops": 5e10,
                                     "copy_bandwidth": 1e10}
  assert cal.launch_overhead_s == {"CPU": 2e-7}
  assert cal.transfer_overhead_s == {"CPU": 5e-5}
  assert cal.links["loopback"].latency_s == pytest.approx(2e-5)
  # Empty steps 0.4 and 0.7 ms, 0.8 ms on both: base 0.3, runs 0.1 and 0.4.
  assert cal.step_overhead_s == pytest.approx(3e-4)
  assert list(cal.run_overhead_s.values()) == pytest.approx([1e-4, 4e-4])
  assert cal.overlap_latency
  path = str(tmp_path / "cal.json")
  cal.save(path)
  assert Calibration.load(path) == cal


def _one_matmul_graph():
  """(graph, measured 2-worker cluster, its second device, the MatMul's
  name)."""
  from tfplace.measurement.local_cluster import make_worker_cluster
  from tfplace.models.registry import build_model
  graph = build_model("chain_mlp", num_layers=1, batch_size=2, input_size=4,
                      hidden=4)
  cluster = _bench().apply(make_worker_cluster(2))
  mm = next(op.name for op in graph.ops if op.type == "MatMul")
  return graph, cluster, cluster.device_names[1], mm


def test_samples_subtract_the_tracer_and_skip_foreign_ops():
  from tfplace.measurement.timing import OpRecord, StepTiming
  graph, cluster, dev, mm = _one_matmul_graph()
  init = next(op.name for i, op in enumerate(graph.ops)
              if not graph.step_mask[i])
  records = (OpRecord(mm, dev, 0.0, 4e-6), OpRecord(mm, "/cpu:9", 0.0, 1.0),
             OpRecord(init, dev, 0.0, 1.0), OpRecord("nope", dev, 0.0, 1.0))
  timing = StepTiming(1e-3, 1e-3, 1e-3, 0.0, 0.0, (1e-3,), records)
  samples = fit.samples_from_timing(graph, cluster, timing, {dev: 5e-7})
  assert len(samples) == 1 and samples[0].op_type == "MatMul"
  assert samples[0].measured_s == pytest.approx(3.5e-6)
  assert samples[0].work_s > 0


def test_a_wide_op_traced_beside_another_is_sampled_as_if_alone():
  # On a multi-core CPU the suite's branches share the intra-op pool: a
  # wide op's duration is taken as if it had run alone (op_concurrency).
  from tfplace.measurement.op_concurrency import SHARE_EXPONENT
  from tfplace.measurement.timing import OpRecord, StepTiming
  graph, cluster, dev, mm = _one_matmul_graph()
  other = next(op.name for i, op in enumerate(graph.ops)
               if graph.step_mask[i] and op.name != mm)
  records = (OpRecord(mm, dev, 0.0, 1e-3), OpRecord(other, dev, 0.0, 1e-3))
  timing = StepTiming(1e-3, 1e-3, 1e-3, 0.0, 0.0, (1e-3,), records)
  samples = fit.samples_from_timing(graph, cluster, timing, {dev: 5e-7})
  matmul = next(x for x in samples if x.op_type == "MatMul")
  assert matmul.measured_s == pytest.approx(1e-3 / 2 ** SHARE_EXPONENT
                                            - 5e-7)


def _simulated_split_runs(graph, cluster, bench, op_types, share,
                          byte_share, extra_latency_s=0.0):
  truth = fit.calibration_from_benchmark(
      bench.with_message_share(share, byte_share, extra_latency_s), cluster,
      op_types)
  sim = fit.calibrated_simulator(graph, cluster, truth)
  rng = np.random.default_rng(0)
  runs = []
  for _ in range(4):
    ids = rng.integers(0, 2, graph.num_colocation_groups)[graph.group_of]
    ids = ids.astype(np.int32)
    runs.append((graph, ids, sim.simulate(ids).step_time_s))
  return runs


def test_message_and_byte_shares_recovered_from_simulated_runs():
  from tfplace.measurement.local_cluster import make_worker_cluster
  from tfplace.models.registry import build_model
  # 64 x 256 floats per tensor: 64 KB take 66 us at 1 GB/s, as much as a
  # message's host cost, so both shares show in the step times.
  graph = build_model("mlp_towers", num_towers=2, hidden=256, batch_size=64,
                      input_size=256, num_layers=1)
  cluster = dataclasses.replace(make_worker_cluster(2),
                                rendezvous_transfers=False)
  bench = _bench()
  op_types = {"CPU": {"MatMul": OpTypeCost(2e-6, 1.0, 4)}}
  runs = _simulated_split_runs(graph, cluster, bench, op_types, 0.7, 0.4)
  assert fit.fit_transfer_figures(cluster, bench, op_types, runs) == (
      pytest.approx((0.7, 0.4, 0.0)))
  # One-core workers: rendezvous transfers; each end pays the measured
  # per-message cost (share 1), no byte share, whatever the runs.
  cluster = make_worker_cluster(2)
  assert cluster.rendezvous_transfers
  runs = _simulated_split_runs(graph, cluster, bench, op_types, 0.7, 0.0)
  assert fit.fit_transfer_figures(cluster, bench, op_types, runs) == (
      1.0, 0.0, 0.0)
  runs = _simulated_split_runs(graph, cluster, bench, op_types, 1.0, 0.0)
  assert fit.fit_transfer_figures(cluster, bench, op_types, runs) == (
      1.0, 0.0, 0.0)
  assert fit.fit_transfer_figures(cluster, bench, op_types, []) == (
      1.0, 0.0, 0.0)
  # What is fitted there: messages that cost 45 us more than the idle
  # benchmarks show (a grid value) are found, and make every split slower.
  slower = _simulated_split_runs(graph, cluster, bench, op_types, 1.0, 0.0,
                                 45e-6)
  assert all(t > u for (_, _, t), (_, _, u) in zip(slower, runs))
  assert fit.fit_transfer_figures(cluster, bench, op_types, slower) == (
      pytest.approx((1.0, 0.0, 45e-6)))
  with pytest.raises(Exception, match="extra_latency_s must be >= 0"):
    bench.with_message_share(1.0, 0.0, -1e-6)


def test_the_trace_excess_is_what_short_one_device_steps_are_over_by():
  from tfplace.measurement.local_cluster import make_worker_cluster
  from tfplace.models.registry import build_model
  graph = build_model("mlp_towers", num_towers=2, hidden=64, batch_size=8,
                      input_size=64, num_layers=1)
  cluster = make_worker_cluster(2)
  cal = fit.calibration_from_benchmark(
      _bench(), cluster, {"CPU": {"MatMul": OpTypeCost(2e-6, 1.0, 4)}})
  sim = fit.calibrated_simulator(graph, cluster, cal)
  ops = int(graph.step_mask.sum())
  on0 = np.zeros(graph.num_ops, np.int32)
  predicted = sim.simulate(on0).step_time_s
  assert predicted < FitBounds().small_step_s
  # Measured 1.5 us per op less than predicted on one run and 0.5 us on
  # another: the median, 1 us. A long run and a split run are left out.
  on1 = on0 + 1
  runs = [(graph, on0, predicted - 1.5e-6 * ops),
          (graph, on1, sim.simulate(on1).step_time_s - 0.5e-6 * ops),
          (graph, on0, 1.0),
          (graph, on0 | (np.arange(graph.num_ops) % 2 == 0), predicted)]
  excess = fit.fit_trace_excess(cluster, cal, runs)
  assert excess == {"CPU": pytest.approx(1e-6)}
  # Within [0, max_trace_excess_s].
  bounds = FitBounds(max_trace_excess_s=2e-7)
  assert fit.fit_trace_excess(cluster, cal, runs, bounds) == {
      "CPU": pytest.approx(2e-7)}
  assert fit.fit_trace_excess(cluster, cal, [(graph, on0, 2 * predicted)]
                              ) == {"CPU": 0.0}
  assert fit.fit_trace_excess(cluster, cal, runs[2:]) == {}


def test_a_launch_bound_device_gives_kernel_time_samples():
  from tfplace.measurement.timing import OpRecord, StepTiming
  graph, cluster, dev, mm = _one_matmul_graph()
  ident = next(op.name for i, op in enumerate(graph.ops)
               if graph.step_mask[i] and op.type != "MatMul")
  # The launch (40 us traced) is not the sample: the kernel (3 us) is, with
  # nothing taken off; an op without a kernel time ran none.
  records = (OpRecord(mm, dev, 0.0, 4e-5, kernel_s=3e-6),
             OpRecord(ident, dev, 0.0, 2e-6))
  timing = StepTiming(1e-3, 1e-3, 1e-3, 0.0, 0.0, (1e-3,), records)
  samples = fit.samples_from_timing(graph, cluster, timing, {dev: 5e-7},
                                    {dev})
  assert sorted(s.measured_s for s in samples) == [0.0, 3e-6]
  assert samples[[s.op_type for s in samples].index("MatMul")].measured_s == (
      3e-6)
  # A step whose tracer recorded no kernel on the device tells nothing.
  untraced = dataclasses.replace(timing, op_records=(
      OpRecord(mm, dev, 0.0, 4e-5), OpRecord(ident, dev, 0.0, 2e-6)))
  assert fit.samples_from_timing(graph, cluster, untraced, {dev: 5e-7},
                                 {dev}) == []
  assert len(fit.samples_from_timing(graph, cluster, timing,
                                     {dev: 5e-7})) == 2
  # A batched product: its products on a CPU; on a launch-bound device
  # one kernel runs them all.
  i = graph.index[mm]
  graph.ops[i] = dataclasses.replace(graph.ops[i], matrix_products=8)
  products = {s.op_type: s.matrix_products for s in
              fit.samples_from_timing(graph, cluster, timing, {dev: 5e-7})}
  assert products == {"MatMul": 8, graph.ops[graph.index[ident]].type: 1}
  assert {s.matrix_products for s in fit.samples_from_timing(
      graph, cluster, timing, {dev: 5e-7}, {dev})} == {1}
  # Types that never ran a kernel there, per launch-bound device type.
  free = fit.kernel_free_types(
      [OpSample("Identity", "GPU", 0.0, 0.0),
       OpSample("StridedSlice", "GPU", 1e-6, 0.0),
       OpSample("StridedSlice", "GPU", 1e-6, 2e-6),
       OpSample("Identity", "CPU", 0.0, 0.0)], {"GPU"})
  assert free == {"GPU": ("Identity",)}


def test_launch_costs_are_the_median_per_kind_over_a_type_s_devices():
  from tfplace.measurement.local_cluster import make_worker_cluster
  bench = _bench()
  bench = dataclasses.replace(bench, devices=(
      dataclasses.replace(bench.devices[0], launch_s={
          "elementwise": 4e-6, "conv": 2e-5, "matmul": 1e-5}),
      dataclasses.replace(bench.devices[1], launch_s={
          "elementwise": 6e-6, "conv": 3e-5})))
  cal = fit.calibration_from_benchmark(bench, make_worker_cluster(2),
                                       kernel_free={"CPU": ("Shape",)})
  assert cal.launch_s == {"CPU": {"conv": pytest.approx(2.5e-5),
                                  "elementwise": pytest.approx(5e-6)}}
  assert cal.kernel_free == {"CPU": ("Shape",)}
  # No launch figures: not launch-bound.
  assert fit.calibration_from_benchmark(
      _bench(), make_worker_cluster(2)).launch_s == {}


def test_stalls_are_the_long_idle_gaps_of_one_device_steps():
  from tfplace.measurement.timing import OpRecord, StepTiming

  def timing(*spans):
    records = tuple(OpRecord(f"op{i}", "/gpu:0", start, dur)
                    for i, (start, dur) in enumerate(spans))
    return StepTiming(1e-3, 1e-3, 1e-3, 0.0, 0.0, (1e-3,), records)

  # Gaps of 100 and 60 us count; 10 us does not; an op that overlaps the
  # one before starts no gap.
  first = timing((0, 1e-5), (1.1e-4, 1e-5), (1.3e-4, 5e-5), (1.5e-4, 1e-5),
                 (2.4e-4, 1e-5))
  second = timing((0, 1e-5), (3.1e-4, 1e-5))
  stalls = fit.fit_stall([("GPU", first), ("GPU", second),
                          ("CPU", second)], {"GPU"})
  assert stalls == {"GPU": pytest.approx((1.6e-4 + 3e-4) / 2)}
  assert fit.fit_stall([("GPU", first)], {"GPU"},
                       FitBounds(stall_gap_s=2e-4)) == {"GPU": 0.0}


def _launch_bound_setup():
  from tfplace.cost.presets import cpu_cluster
  from tfplace.models.registry import build_model
  graph = build_model("mlp_towers", num_towers=2, hidden=64, batch_size=8,
                      input_size=64, num_layers=1)
  cluster = cpu_cluster(2)
  cal = Calibration(launch_s={"CPU": {"elementwise": 4e-6,
                                      "matmul": 1e-5}})
  return graph, cluster, cal


def test_the_dispatch_is_what_launch_bound_steps_are_under_by():
  graph, cluster, cal = _launch_bound_setup()
  truth = dataclasses.replace(cal, dispatch_s={"CPU": 2e-6})
  sim = fit.calibrated_simulator(graph, cluster, truth)
  on0 = np.zeros(graph.num_ops, np.int32)
  measured = sim.simulate(on0).step_time_s
  assert measured < FitBounds().small_step_s
  assert fit.fit_dispatch(cluster, cal, [(graph, on0, measured)]) == {
      "CPU": pytest.approx(2e-6)}
  # Within [0, max_dispatch_s]; the trace excess leaves such types out.
  assert fit.fit_dispatch(cluster, cal, [(graph, on0, measured)],
                          FitBounds(max_dispatch_s=1e-6)) == {
                              "CPU": pytest.approx(1e-6)}
  assert fit.fit_dispatch(cluster, cal, [(graph, on0, 1e-7)]) == {
      "CPU": 0.0}
  assert fit.fit_trace_excess(cluster, cal, [(graph, on0, 1e-7)]) == {}


def test_a_loops_nodes_fit_only_the_types_no_top_level_op_samples():
  # A loop's executions (`OpSample.in_loop`) of a type the top-level ops
  # sample leave its fit as it was; a type only loops run is fitted on
  # them.
  top = _samples(2e-6, 1.3, WORKS, "MatMul", seed=1)
  in_loop = [dataclasses.replace(s, measured_s=10 * s.measured_s,
                                 in_loop=True)
             for s in _samples(2e-6, 1.3, WORKS, "MatMul", seed=2)]
  merges = [OpSample("Merge", "CPU", 0.0, 7e-7, in_loop=True)] * 5
  fits = fit.fit_op_types(top + in_loop + merges)["CPU"]
  alone = fit.fit_op_types(top)["CPU"]["MatMul"]
  assert fits["MatMul"] == alone
  assert fits["Merge"].fixed_s == pytest.approx(7e-7, rel=0.05)
