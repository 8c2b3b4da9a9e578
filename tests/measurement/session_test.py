"""Tests for placed GraphDefs and running them in a Session on 2 CPUs."""

import os

import numpy as np
import pytest

import tfplace  # noqa: F401
import tf_keras

from tfplace.measurement import session
from tfplace.placement import placed_graph_def
from tfplace.errors import MeasureError, PlacementError
from tfplace.graph.importers import import_graph
from tfplace.placement import Placement

TESTDATA = os.path.join(os.path.dirname(__file__), "..", "..", "testdata")
CPU = "/job:localhost/replica:0/task:0/device:CPU:{}"


def _by_group(graph, num_devices=2):
  """Colocation group g -> CPU:(g mod num_devices)."""
  return Placement(devices={op.name: CPU.format(int(graph.group_of[i]) %
                                                num_devices)
                            for i, op in enumerate(graph.ops)})


@pytest.fixture(scope="module")
def keras_graph():
  model = tf_keras.Sequential([
      tf_keras.layers.Dense(4, activation="relu", input_shape=(3,)),
      tf_keras.layers.Dense(2)])
  x = np.random.RandomState(0).randn(6, 3).astype(np.float32)
  y = np.random.RandomState(1).randn(6, 2).astype(np.float32)
  return import_graph(model, loss="mse", optimizer="sgd", x=x, y=y)


def test_round_trip_on_two_cpus(keras_graph):
  g = keras_graph
  placement = _by_group(g)
  assert len(set(placement.devices.values())) == 2
  placed = placed_graph_def(g, placement)
  assert all(n.device == placement.devices[n.name] for n in placed.node)
  base = session.run_training_step(g.graph_def, g.fetches, steps=2)
  run = session.run_training_step(placed, g.fetches, num_cpu_devices=2,
                                steps=2, trace=True)
  assert run.loss == pytest.approx(base.loss, rel=1e-6)
  # Only the step is traced; the init ops (20 of 79) ran before it.
  assert len(run.devices_by_op) >= 0.7 * g.num_ops
  wrong = {n: d for n, d in run.devices_by_op.items()
           if placement.devices[n] != d}
  assert not wrong
  assert {CPU.format(0), CPU.format(1)} <= set(run.devices_by_op.values())


def test_unplaced_graph_runs_on_cpu0():
  g = import_graph(os.path.join(TESTDATA, "mlp_2tower.pbtxt"))
  run = session.run_training_step(g.graph_def, g.fetches, trace=True)
  assert set(run.devices_by_op.values()) == {CPU.format(0)}
  # mlp_2tower's Consts: x, y, w0, w1 drawn in this order from
  # RandomState(0), the weights scaled by 0.3; relu towers added; mean
  # squared error.
  rng = np.random.RandomState(0)
  x, y = rng.randn(4, 6), rng.randn(4, 2)
  w0, w1 = rng.randn(6, 2) * 0.3, rng.randn(6, 2) * 0.3
  pred = np.maximum(x @ w0, 0) + np.maximum(x @ w1, 0)
  assert run.loss == pytest.approx(np.mean((pred - y) ** 2), rel=1e-5)


def test_device_missing_from_session_is_an_error():
  g = import_graph(os.path.join(TESTDATA, "matmul_relu_sum.pbtxt"))
  placed = Placement(devices={op.name: CPU.format(3) for op in g.ops})
  with pytest.raises(MeasureError, match="Cannot assign a device"):
    session.run_training_step(placed_graph_def(g, placed), g.fetches,
                            num_cpu_devices=2)


def test_bad_placements_are_rejected():
  g = import_graph(os.path.join(TESTDATA, "mlp_2tower.pbtxt"))
  good = {op.name: CPU.format(0) for op in g.ops}
  with pytest.raises(PlacementError, match="not in graph"):
    placed_graph_def(
        g, Placement(devices={**good, "ghost": CPU.format(0)}))
  with pytest.raises(PlacementError, match="no FOO kernel"):
    placed_graph_def(g, Placement.from_dict(
        {"placement": {**good, "loss": "/device:FOO:0"}}))
  with pytest.raises(PlacementError, match="malformed"):
    Placement.from_dict({"placement": {**good, "loss": "cpu0"}})
  split = dict(good, **{"tower0/w/Assign": CPU.format(1)})
  with pytest.raises(PlacementError, match="colocation group"):
    placed_graph_def(g, Placement(devices=split))
