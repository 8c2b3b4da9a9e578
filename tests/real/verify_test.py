"""verify_top_k on real steps: in process on two logical CPUs, and on a
2-worker TF server cluster whose worker is killed during the rounds."""

import numpy as np
import pytest

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.cost.presets import cpu_cluster
from tfplace.errors import ClusterError, MeasureError
from tfplace.measurement.config import MeasureConfig
from tfplace.models.registry import build_model
from tfplace.real import interleaved
from tfplace.real.verify import VerifySettings, verify_top_k

FAST = VerifySettings(rounds=2, measure=MeasureConfig(warmup=1, steps=2),
                      progress=False)
SEARCH = {"max_evaluations": 300, "init": "round_robin", "progress": False}


@pytest.fixture(scope="module")
def graph():
  return build_model("mlp_towers", num_towers=2, hidden=16, batch_size=8,
                     input_size=16, num_layers=2)


def test_top_k_in_process_measures_distinct_candidates_and_the_heuristic(
    graph):
  cluster = cpu_cluster(2)
  result = verify_top_k(graph, "local", "local_search", SEARCH, top_k=3,
                        cluster=cluster, seed=0, settings=FAST)
  report = result.report
  arrays = [p.to_array(graph, cluster).tobytes() for p in result.candidates]
  assert len(set(arrays)) == len(arrays) == len(report.candidates)
  assert 2 <= len(arrays) <= 4  # 3 of the search (+ the best heuristic)
  assert "best heuristic" in report.candidates[report.reference].label
  ratios = [c.ratio for c in report.candidates]
  assert all(r is not None and r > 0 for r in ratios)
  assert ratios[report.reference] == pytest.approx(1.0)
  fastest = int(np.argmin(ratios))
  if fastest == report.reference:
    assert report.chosen == fastest and report.duel_candidate is None
    assert report.speedup_over_heuristic == pytest.approx(1.0)
  else:  # the rounds' fastest met the heuristic again in a duel
    assert report.duel_candidate == fastest
    won = report.duel_ratio < 1.0
    assert report.chosen == (fastest if won else report.reference)
    assert report.speedup_over_heuristic == pytest.approx(
        1 / report.duel_ratio if won else 1.0)
  assert result.placement.devices == result.candidates[report.chosen].devices
  assert result.placement.metadata.extra["verify"]["chosen"] == report.chosen
  searched = [c.predicted_s for c in report.candidates
              if c.label.startswith("local_search #")]
  assert len(searched) == 3 and searched == sorted(searched)


def test_a_heuristic_is_topped_up_with_the_next_heuristics(graph):
  result = verify_top_k(graph, "local", "round_robin", top_k=3,
                        cluster=cpu_cluster(2), settings=FAST)
  labels = [c.label for c in result.report.candidates]
  assert labels[0] == "round_robin" and len(labels) in (3, 4)
  assert any("best heuristic" in label for label in labels)


def test_bad_targets_fail_before_any_search(graph):
  with pytest.raises(MeasureError, match="not reachable"):
    verify_top_k(graph, "grpc://127.0.0.1:1", "m_etf", settings=FAST)
  from tfplace.measurement.local_cluster import RemoteCluster
  remote = RemoteCluster({"worker": ["127.0.0.1:1", "127.0.0.1:2"]})
  with pytest.raises(MeasureError, match="not reachable"):
    verify_top_k(graph, remote, "m_etf", settings=FAST)
  with pytest.raises(MeasureError, match="names devices of TF servers"):
    verify_top_k(graph, "local", "m_etf",
                 cluster=tfplace.load_cluster("2hosts_4gpu"), settings=FAST)
  with pytest.raises(Exception, match="top_k must be 1 to 16"):
    verify_top_k(graph, "local", "m_etf", top_k=17, cluster=cpu_cluster(2))


def test_a_cluster_spec_dict_is_a_target_of_its_servers(graph):
  # A dict was taken for "this process": "real runs in this process need
  # the cluster to place on (cluster=...)"; and RemoteCluster, the class
  # the message named, was not in tfplace's API.
  from tfplace.real.target import resolve_target, target_cluster
  spec = {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}
  with pytest.raises(MeasureError, match="127.0.0.1:1 is not reachable"):
    verify_top_k(graph, spec, "m_etf", settings=FAST)
  with pytest.raises(MeasureError, match="127.0.0.1:1 is not reachable"):
    tfplace.place_on_target(graph, spec, "m_etf")
  remote = tfplace.RemoteCluster(spec)
  assert resolve_target(spec) == resolve_target(remote)
  assert target_cluster(spec).device_names == [
      "/job:worker/replica:0/task:0/device:CPU:0",
      "/job:worker/replica:0/task:1/device:CPU:0"]
  with pytest.raises(MeasureError, match="cluster spec must look like"):
    verify_top_k(graph, {"ps": ["127.0.0.1:1"]}, "m_etf", settings=FAST)


def test_a_calibration_for_another_cluster_is_refused(graph):
  from tfplace.cost.calibrated import Calibration, CalibratedCostModel
  other = Calibration(run_overhead_s={
      "/job:worker/replica:0/task:0/device:CPU:0": 1e-4,
      "/job:worker/replica:0/task:1/device:CPU:0": 1e-4})
  with pytest.raises(ClusterError, match="made for another cluster"):
    verify_top_k(graph, "local", "m_etf", cluster=cpu_cluster(2),
                 cost_model=CalibratedCostModel(other), settings=FAST)
  gpu_only = Calibration(launch_overhead_s={"GPU": 5e-6})
  with pytest.raises(ClusterError, match="device types GPU"):
    verify_top_k(graph, "local", "m_etf", cluster=cpu_cluster(2),
                 cost_model=CalibratedCostModel(gpu_only), settings=FAST)


def test_a_worker_killed_during_the_rounds_stops_them_with_the_best_kept(
    graph, monkeypatch):
  real_measure_batch = interleaved.measure_batch
  calls = []
  with tfplace.LocalCluster(num_workers=2) as servers:

    def kill_after_two(*args, **kwargs):  # the real measurement, counted
      calls.append(1)
      if len(calls) == 3:
        servers.processes[1].kill()
        servers.processes[1].wait()
      return real_measure_batch(*args, **kwargs)

    monkeypatch.setattr(interleaved, "measure_batch", kill_after_two)
    settings = VerifySettings(rounds=3, measure=MeasureConfig(
        warmup=1, steps=2, step_timeout_s=5), progress=False)
    result = verify_top_k(graph, servers, "m_etf", top_k=3, settings=settings)
  report = result.report
  assert "worker task 1" in report.stopped
  failed = [c for c in report.candidates if c.errors]
  assert len(failed) == 1 and "worker task 1" in failed[0].errors[0]
  assert len(calls) == 3  # the rounds stopped at the first failure
  measured = [i for i, c in enumerate(report.candidates) if c.measured_s]
  assert report.chosen in measured and len(measured) == 2


def test_ctrl_c_during_the_rounds_keeps_what_was_measured(graph, monkeypatch):
  # Ctrl-C during the rounds lost the search and every measurement: `tfplace
  # place --verify_top_k` wrote nothing, though a search's best so far is
  # written on Ctrl-C everywhere else.
  from tfplace import interrupts
  real_measure_batch = interleaved.measure_batch
  calls = []

  def interrupt_the_third(*args, **kwargs):
    calls.append(1)
    if len(calls) == 3:
      raise KeyboardInterrupt
    return real_measure_batch(*args, **kwargs)

  monkeypatch.setattr(interleaved, "measure_batch", interrupt_the_third)
  try:
    result = verify_top_k(graph, "local", "round_robin", top_k=3,
                          cluster=cpu_cluster(2), settings=FAST)
    assert interrupts.interrupted()
  finally:
    interrupts.clear()
  report = result.report
  assert "interrupted (Ctrl-C) in round 1" in report.stopped
  measured = [i for i, c in enumerate(report.candidates) if c.measured_s]
  assert len(calls) == 3 and len(measured) == 2
  assert report.chosen in measured
  assert result.placement.metadata.extra["verify"]["stopped"] == report.stopped
