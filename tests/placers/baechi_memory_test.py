"""Tests of the activation share Baechi's placers charge, checked on the
simulator (`tfplace.placers.baechi_memory`)."""

import tfplace  # noqa: F401  (before TensorFlow)

import numpy as np
import pytest

from tfplace.cost.cluster import Device, LinkSpec, make_cluster
from tfplace.cost.op_costs import OpCosts
from tfplace.graph.op_graph import Edge, Op, OpGraph
from tfplace.placers import baechi_common
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
  # away, so the ladder stops there: 4 shares, and Baechi's own estimate.
  problem = _problem(_chain(10, 1000, 100), _gpus([4500, 1e9]), [1.0, 3.0])
  published, published_ids, published_result = _place(
      problem, "m_etf", activation_fraction=1.0)
  assert published_ids.tolist() == [0] * 4 + [1] * 6
  placement, ids, result = _place(problem, "m_etf")
  assert ids.tolist() == [0] * 10
  assert result.feasible
  assert result.step_time_s < published_result.step_time_s
  assert placement.metadata.extra["memory_share"] == {
      "activation_fraction": 0.35, "use_cpu": False,
      "charge_received": True, "shares_tried": 5}


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


def _gradient_sum(terms, term_bytes):
  """A variable read by `terms` ops whose outputs one AddN, colocated with
  the variable, sums: the variable's device holds every term at once."""
  ops = [Op("var", "VarHandleOp", output_bytes=(100,), param_bytes=100)]
  ops += [Op(f"term{k}", "MatMul", output_bytes=(term_bytes,))
          for k in range(terms)]
  ops.append(Op("sum", "AddN", output_bytes=(term_bytes,)))
  edges = [Edge(0, 1 + k, 0, 100) for k in range(terms)]
  edges += [Edge(1 + k, terms + 1, 0, term_bytes) for k in range(terms)]
  groups = np.array([0] + list(range(1, terms + 1)) + [0])
  return OpGraph(ops, edges, None, colocation_groups=groups)


@pytest.mark.parametrize("name", BAECHI)
def test_received_terms_of_a_sum_keep_its_group_off_a_small_gpu(name):
  # The sum receives four 1,000-B terms: wherever they are computed, the
  # device of the variable's group holds 4,000 B at once, more than
  # GPU:0's 3,000. Baechi's estimate charges the group 1,200 B and puts it
  # on GPU:0 at every share (over memory); charging what the group will
  # receive puts it on the large GPU:1.
  problem = _problem(_gradient_sum(4, 1000), _gpus([3000, 1e9]), [1.0, 1.0])
  _, ids, result = _place(problem, name, charge_received=False)
  assert ids[0] == 0 and not result.feasible
  _, ids, result = _place(problem, name)
  assert ids[0] == ids[-1] == 1
  assert result.feasible
  assert result.peak_memory_bytes[0] <= 3000


def test_a_producer_on_the_receiving_device_is_given_back():
  problem = _problem(_gradient_sum(2, 1000), _gpus([1e9, 1e9]), [1.0, 1.0])
  view = baechi_common.OpView(
      problem, baechi_common.BaechiOptions(activation_fraction=0.5))
  memory = baechi_common.MemoryState(view)
  assert memory.received(0).tolist() == [1000.0, 1000.0]  # Half of 2 x 1,000.
  # The variable's group: 100 B of parameters, half of its outputs (100 +
  # 1,000) and half of the two terms it will receive (2 x 1,000).
  memory.bind(0, 1)
  assert memory.budget.used.tolist() == [0.0, 1650.0]
  memory.bind(1, 0)  # term0 receives the variable's 100 B on GPU:0.
  memory.bind(2, 1)  # term1 computed where the sum is: its 500 B given back,
  assert memory.budget.used.tolist() == [550.0, 1650.0]  # its output charged.
  # Nothing is left to charge the group's device for its inputs.
  assert memory.received(0)[1] == 0.0
