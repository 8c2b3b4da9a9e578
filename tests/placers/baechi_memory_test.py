"""Tests of the activation share Baechi's placers charge, checked on the
simulator (`tfplace.placers.baechi_memory`)."""

import tfplace  # noqa: F401  (before TensorFlow)

import numpy as np
import pytest

from tfplace.cost.cluster import Device, LinkSpec, make_cluster
from tfplace.cost.op_costs import OpCosts
from tfplace.graph.op_graph import Edge, Op, OpGraph
from tfplace.placers.problem import PlacementProblem
from tfplace.placers.registry import get_placer

BAECHI = ("m_topo", "m_etf", "m_sct")


def _chain(length, output_bytes, param_bytes):
  ops = [Op(f"op{k}", "X", output_bytes=(output_bytes,),
            param_bytes=param_bytes) for k in range(length)]
  edges = [Edge(k, k + 1, 0, output_bytes) for k in range(length - 1)]
  return OpGraph(ops, edges, None)


def _problem(graph, devices, slowdown):
  """Every op takes 1 ms on the first device, `slowdown[d]` ms on device d."""
  cluster = make_cluster("test", devices, default_link=LinkSpec(1e-3, 1e6))
  seconds = np.outer(np.full(graph.num_ops, 1e-3), slowdown)
  return PlacementProblem(graph, cluster, OpCosts(
      seconds, graph.param_bytes, graph.output_bytes))


def _gpus(memories):
  return [Device(f"/device:GPU:{i}", "GPU", 1e12, 1e11, m)
          for i, m in enumerate(memories)]


def _place(problem, name, **options):
  placement = get_placer(name, options).place(problem)
  placement.validate(problem.graph, problem.cluster)
  ids = placement.to_array(problem.graph, problem.cluster)
  return placement, ids, problem.simulator.simulate(ids)


def test_a_smaller_share_keeps_the_chain_on_the_fast_gpu():
  # 100 B of parameters and 1,000 B of output per op: Baechi's estimate
  # charges 1,100 B each, so 4 ops fill GPU:0's 4,500 B and the rest go to
  # the slow GPU:1; the simulator's peak for all ten on GPU:0 is ~3,000 B
  # (parameters and two live outputs). Shares 0.75 and 0.5 still turn
  # GPU:0 away; at 0.35 (450 B each) all ten fit and nothing is turned
  # away, so the ladder stops there.
  problem = _problem(_chain(10, 1000, 100), _gpus([4500, 1e9]), [1.0, 3.0])
  published, published_ids, published_result = _place(
      problem, "m_etf", activation_fraction=1.0)
  assert published_ids.tolist() == [0] * 4 + [1] * 6
  placement, ids, result = _place(problem, "m_etf")
  assert ids.tolist() == [0] * 10
  assert result.feasible
  assert result.step_time_s < published_result.step_time_s
  assert placement.metadata.extra["memory_share"] == {
      "activation_fraction": 0.35, "use_cpu": False, "shares_tried": 4}


@pytest.mark.parametrize("name", BAECHI)
def test_without_memory_pressure_the_published_placement_is_kept(name):
  problem = _problem(_chain(10, 1000, 100), _gpus([1e9, 1e9]), [1.0, 1.0])
  _, published, _ = _place(problem, name, activation_fraction=1.0)
  placement, ids, _ = _place(problem, name)
  assert ids.tolist() == published.tolist()
  assert "memory_share" not in placement.metadata.extra


@pytest.mark.parametrize("name", BAECHI)
def test_the_cpu_takes_what_fits_on_no_gpu(name):
  # 1,000 B of parameters per op: ten need 10,000 B, the GPU holds 3,000.
  # Baechi places on accelerators only and overflows the GPU; the CPU
  # ladder gives a placement within memory.
  devices = [Device("/device:CPU:0", "CPU", 1e11, 1e10, 1e9)] + _gpus([3000])
  problem = _problem(_chain(10, 100, 1000), devices, [2.0, 1.0])
  _, _, published = _place(problem, name, activation_fraction=1.0)
  assert not published.feasible
  placement, ids, result = _place(problem, name)
  assert result.feasible
  assert (ids == 0).any()
  assert placement.metadata.extra["memory_share"]["use_cpu"] is True


def test_nothing_fits_keeps_the_published_placement():
  # Ten ops of 1,000 B of parameters on two GPUs of 3,000 B: no share and
  # no CPU (there is none) fits; the share-1 placement comes back.
  problem = _problem(_chain(10, 100, 1000), _gpus([3000, 3000]), [1.0, 1.0])
  _, published, _ = _place(problem, "m_etf", activation_fraction=1.0)
  placement, ids, result = _place(problem, "m_etf")
  assert not result.feasible
  assert ids.tolist() == published.tolist()
  assert "memory_share" not in placement.metadata.extra


def test_memory_fraction_is_the_limit_the_simulator_checks():
  # With half of GPU:0's 7,000 B usable, all ten ops (~3,000 B simulated)
  # no longer fit at any share that would put them there.
  problem = _problem(_chain(10, 1000, 100), _gpus([7000, 1e9]), [1.0, 3.0])
  _, ids, result = _place(problem, "m_etf", memory_fraction=0.3)
  assert (ids == 1).any()
  assert result.peak_memory_bytes[0] <= 0.3 * 7000
