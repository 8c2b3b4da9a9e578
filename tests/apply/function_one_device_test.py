"""PlacedFunction, the report and the variable plan on this process's CPU."""

import numpy as np
import pytest

import tfplace
import tensorflow as tf
import tf_keras

from tfplace.apply import ApplyOptions, PlacedFunction
from tfplace.apply.importing import import_step
from tfplace.apply.variables import PlannedVariable, VariableReplay
from tfplace.errors import PlacementError
from tfplace.placement import Placement

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"


def _make():
  w = tf.Variable(tf.ones([3, 2]), name="w")
  opt = tf_keras.optimizers.SGD(0.1, momentum=0.9)

  @tf.function
  def step(x):
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum(tf.matmul(x, w) ** 2)
    opt.apply_gradients([(tape.gradient(loss, w), w)])
    return loss

  return step, w, opt


X = np.ones([4, 3], np.float32)


def test_all_on_cpu0_runs_and_reports_every_op():
  step, w, opt = _make()
  graph = import_step(step, args=(X,), optimizers=[opt])
  placement = Placement({op.name: CPU0 for op in graph.ops})
  placed = tfplace.apply(step, placement, args=(X,))
  report = placed.report
  assert report.named_ops == report.num_trace_ops and not report.unnamed_ops
  assert report.missing_ops == ()                 # init ops only in the import
  assert {v.name for v in report.variables} >= {"w:0", "SGD/m/w:0"}
  # 3 x 2 ones: loss = 4 rows x 2 columns x 3^2.
  assert float(placed(X)) == pytest.approx(72.0)
  assert float(w[0, 0]) < 1.0


def test_the_slot_is_colocated_with_its_variable_in_the_import():
  step, _, opt = _make()
  graph = import_step(step, args=(X,), optimizers=[opt])
  handles = {op.name: i for i, op in enumerate(graph.ops)
             if op.type == "VarHandleOp"}
  groups = {}
  for name, i in handles.items():
    groups.setdefault(int(graph.group_of[i]), []).append(name)
  # w and its momentum slot: one group; the iteration counter and the
  # learning rate: one each.
  assert sorted(len(g) for g in groups.values()) == [1, 1, 2]


def test_unnamed_ops_are_listed_and_strict_refuses_them():
  step, _, _ = _make()
  graph = import_step(step, args=(X,))
  names = [op.name for op in graph.ops]
  dropped = [n for n in names if n.startswith("gradient_tape/")][:3]
  placement = Placement({n: CPU0 for n in names if n not in dropped})
  report = tfplace.apply(step, placement, args=(X,)).report
  assert sorted(report.unnamed_ops) == sorted(dropped)
  with pytest.raises(PlacementError, match=r"strict: 3 op\(s\)"):
    tfplace.apply(step, placement, args=(X,),
                  options=ApplyOptions(strict=True))


def test_a_placement_file_and_the_callable_package(tmp_path):
  step, _, _ = _make()
  graph = import_step(step, args=(X,))
  path = str(tmp_path / "p.json")
  Placement({op.name: CPU0 for op in graph.ops}).save(path)
  import tfplace.apply.keras  # noqa: F401  (tfplace.apply is the package now)
  placed = tfplace.apply(step, path)
  assert isinstance(placed, PlacedFunction)
  assert float(placed(X)) > 0 and placed.report.named_fraction == 1.0


def test_a_build_that_creates_other_variables_is_an_error():
  plan = [PlannedVariable(name="w:0", shape=(3, 2), dtype="float32",
                          device=CPU0)]
  replay = VariableReplay(plan)
  with replay.scope(), pytest.raises(PlacementError,
                                     match=r"variable #0 as 'w:0' \[2, 2\]"):
    tf.Variable(tf.ones([2, 2]), name="w")
  replay = VariableReplay(plan)
  with replay.scope():
    v = tf.Variable(tf.ones([3, 2]), name="w")
    extra = tf.Variable(1.0, name="extra")
  assert v.device == CPU0 and replay.unplanned == [extra.name]


def test_options_are_checked():
  with pytest.raises(PlacementError, match="min_named_fraction"):
    ApplyOptions(min_named_fraction=1.5)
