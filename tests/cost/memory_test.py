"""Tests for the whole-cluster memory check."""

import pytest

from tfplace.cost.cluster import Cluster, Device
from tfplace.cost.memory import check_model_fits, memory_floor_bytes
from tfplace.errors import ClusterError
from tfplace.graph.op_graph import Edge, Op, OpGraph


def _graph():
  # A variable of 400 B feeding a matmul whose 100 B output feeds a loss.
  ops = [Op("w", "VarHandleOp", ((),), ("resource",), (8,), param_bytes=400),
         Op("mm", "MatMul", ((5, 5),), ("float32",), (100,)),
         Op("loss", "Sum", ((),), ("float32",), (4,))]
  edges = [Edge(0, 1, 0, 8), Edge(1, 2, 0, 100)]
  return OpGraph(ops, edges, graph_def=None, name="g")


def _cluster(memory_bytes):
  return Cluster("c", tuple(
      Device(f"/device:GPU:{i}", "GPU", 1e12, 1e11, memory_bytes)
      for i in range(2)))


def test_floor_is_params_plus_largest_working_set():
  # mm reads 8 B and writes 100 B; loss reads 100 B and writes 4 B.
  assert memory_floor_bytes(_graph()) == 400 + 108


def test_model_that_fits_across_devices_passes():
  check_model_fits(_graph(), _cluster(memory_bytes=300))  # 600 >= 508


def test_model_larger_than_all_devices_is_rejected():
  with pytest.raises(ClusterError, match="more than all 2 devices"):
    check_model_fits(_graph(), _cluster(memory_bytes=200))  # 400 < 508
