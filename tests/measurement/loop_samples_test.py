"""Tests for the nodes a traced step's While loops ran
(tfplace.measurement.timing.loop_op_records) and the op-type samples they
give (tfplace.measurement.loop_samples), on a real traced step."""

import collections
import dataclasses

import tfplace  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TF)
import pytest
import tensorflow as tf

from tfplace.graph.lowered_loops import body_row
from tfplace.measurement.local_cluster import make_worker_cluster
from tfplace.measurement.loop_samples import loop_samples, traced_type
from tfplace.measurement.timing import (LoopOpRecord, StepTiming,
                                        loop_op_records)
from tfplace.models import registry

SIZES = dict(batch_size=2, seq_len=3, input_dim=4, hidden=4)


@pytest.fixture(scope="module")
def traced():
  built = registry.build_tf_graph("calib_loop", **SIZES)
  graph = registry.build_model("calib_loop", **SIZES)
  config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1,
                                    inter_op_parallelism_threads=1)
  with built.graph.as_default():
    with tf.compat.v1.Session(graph=built.graph, config=config) as sess:
      sess.run(built.init_op)
      sess.run(built.train_op)
      metadata = tf.compat.v1.RunMetadata()
      sess.run(built.train_op, options=tf.compat.v1.RunOptions(
          trace_level=tf.compat.v1.RunOptions.FULL_TRACE),
               run_metadata=metadata)
  return graph, loop_op_records(metadata.step_stats, graph)


def test_the_loops_nodes_are_recorded_with_their_executions(traced):
  graph, records = traced
  loops = {op.name: op.body for op in graph.ops if op.body is not None}
  assert len(loops) == 2 and {r.loop for r in records} == set(loops)
  trips = SIZES["seq_len"]
  by_type = collections.defaultdict(int)
  for r in records:
    assert r.executions >= 1 and r.total_s >= 0
    by_type[(r.loop, traced_type(r.op_type))] += r.executions
  forward = next(n for n in loops if not n.startswith("gradients"))
  frame = {row.type: row.executions for row in loops[forward].ops
           if row.name.endswith("(loop frame)")}
  # The forward frame's rows count what the step ran: its live loop
  # variables, and an Enter alone for each variable handle.
  for op_type in ("Merge", "Switch", "NextIteration", "LoopCond"):
    assert by_type[(forward, op_type)] == frame[op_type], op_type
  assert by_type[(forward, "TensorListPushBack")] == sum(
      row.executions for row in loops[forward].ops
      if row.type == "TensorListPushBack")
  gradient = next(n for n in loops if n.startswith("gradients"))
  assert by_type[(gradient, "TensorListPopBack")] > 0
  assert by_type[(gradient, "TensorListPopBack")] % trips == 0


def test_each_body_node_maps_to_a_row_with_its_executions(traced):
  graph, records = traced
  loops = {op.name: op.body for op in graph.ops if op.body is not None}
  mapped = 0
  for r in records:
    row = body_row(r.name, r.op_type, loops[r.loop])
    if row is not None and not row.name.endswith("(loop frame)"):
      assert r.executions == row.executions, r.name
      mapped += 1
  assert mapped >= 20


def test_loop_samples_give_the_loop_only_types(traced):
  graph, records = traced
  cluster = make_worker_cluster(1)
  device = cluster.devices[0].name
  timing = StepTiming(1e-3, 1e-3, 1e-3, 0.0, 0.0, (1e-3,),
                      loop_records=tuple(
                          LoopOpRecord(r.name, r.loop, r.op_type, device,
                                       r.executions, r.total_s)
                          for r in records))
  samples = loop_samples(graph, cluster, timing, {device: 1e-7})
  types = {s.op_type for s in samples}
  assert {"Merge", "Switch", "NextIteration", "TensorListPushBack",
          "TensorListPopBack"} <= types
  assert all(s.in_loop and s.measured_s >= 0 for s in samples)
  pushes = [s for s in samples if s.op_type == "TensorListPushBack"]
  assert all(s.work_s > 0 for s in pushes)
  assert all(s.work_s == 0 for s in samples if s.op_type == "Merge")
  # Another device's records, or a launch-bound device's, give none.
  assert not loop_samples(graph, cluster, timing, {}, (device,))
  elsewhere = dataclasses.replace(timing, loop_records=tuple(
      dataclasses.replace(r, device="/job:nowhere/replica:0/task:0/device:CPU:0")
      for r in timing.loop_records))
  assert not loop_samples(graph, cluster, elsewhere, {})


def test_loop_records_survive_a_round_trip():
  record = LoopOpRecord("w/merge/_3", "w", "Merge", "/cpu:0", 4, 2e-6)
  timing = StepTiming(1e-3, 1e-3, 1e-3, 0.0, 0.0, (1e-3,),
                      loop_records=(record,))
  assert StepTiming.from_dict(timing.to_dict()).loop_records == (record,)
  old = timing.to_dict()
  del old["loop_records"]
  assert StepTiming.from_dict(old).loop_records == ()


def test_traced_kernel_names_give_their_op_type():
  assert traced_type("_MklMatMul") == "MatMul"
  assert traced_type("_MklNativeFusedMatMul") == "FusedMatMul"
  assert traced_type("Merge") == "Merge"
