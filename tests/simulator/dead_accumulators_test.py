"""Loop accumulators TF prunes: no transfers from or to them."""

import collections

import tfplace  # noqa: F401  (before TensorFlow)

import numpy as np
import tensorflow as tf

from tfplace.cost.op_costs import OpCosts
from tfplace.cost.presets import cpu_cluster
from tfplace.graph.op_graph import Edge, Op, OpGraph, StepFetches
from tfplace.models.registry import build_model
from tfplace.simulator.dead_accumulators import dead_ops
from tfplace.simulator.simulator import Simulator

# name, type, inputs (in the NodeDef's order)
_NODES = [
    ("size", "Const", []),  # read by the dead accumulator only
    ("size2", "Const", []),
    ("shared", "Const", []),  # read by both accumulators and by "x"
    ("acc", "EmptyTensorList", ["shared", "size"]),  # output 1 unread
    ("kept", "EmptyTensorList", ["shared", "size2"]),  # output 2 read
    ("x", "Mul", ["shared", "shared"]),  # output 0 read, not a list
    ("loop", "StatelessWhile", ["x", "acc", "kept"]),
    ("use", "Mul", ["loop", "loop:2"]),
    ("train", "NoOp", ["^use"]),
]


def loop_graph(with_graph_def=True):
  names = [n for n, _, _ in _NODES]
  graph_def = tf.compat.v1.GraphDef()
  edges = []
  for dst, (name, op, inputs) in enumerate(_NODES):
    graph_def.node.add(name=name, op=op, input=inputs)
    for tensor in inputs:
      src, _, slot = tensor.lstrip("^").partition(":")
      control = tensor.startswith("^")
      edges.append(Edge(names.index(src), dst,
                        -1 if control else int(slot or 0), 0 if control else 8))
  ops = [Op(name=n, type=t, output_shapes=((2,),), output_bytes=(8, 8, 8))
         for n, t, _ in _NODES]
  return OpGraph(ops, edges, graph_def if with_graph_def else None,
                 fetches=StepFetches(train_ops=("train",)), name="loop")


def test_an_unread_accumulator_and_what_only_it_reads_are_dead():
  graph = loop_graph()
  dead = dead_ops(graph, graph.step_mask)
  assert [graph.ops[i].name for i in np.flatnonzero(dead)] == ["size", "acc"]


def test_nothing_is_dead_without_the_graph_def():
  graph = loop_graph(with_graph_def=False)
  assert not dead_ops(graph, graph.step_mask).any()


def test_a_dead_accumulator_on_another_device_is_not_sent():
  graph = loop_graph()
  cluster = cpu_cluster(2)
  m = graph.num_ops
  costs = OpCosts(compute_s=np.full((m, 2), 1e-3),
                  param_bytes=np.zeros(m, np.int64),
                  output_bytes=np.full(m, 24, np.int64))
  # The accumulators on device 1, everything else on device 0. "acc" and
  # its "size" send nothing; "shared" is copied to device 1 (read there
  # and on device 0, `replicated_constants`), "size2" is sent to "kept",
  # "kept" to the loop.
  ids = np.array([0, 0, 0, 1, 1, 0, 0, 0, 0])
  result = Simulator(graph, cluster, costs).simulate(ids, True)
  sent = sorted(graph.ops[t.producer].name for t in result.transfers)
  assert sent == ["kept", "size2"]


def test_the_keras_lstms_unread_accumulators_are_dead():
  graph = build_model("keras_lstm")
  dead = dead_ops(graph, graph.step_mask)
  types = collections.Counter(graph.ops[i].type for i in np.flatnonzero(dead))
  # Measured: 22 of the forward loop's 25 unread loop variables are
  # TensorList accumulators, absent from the partition graphs TF ran, with
  # their shape and size constants (section "Replicated constants" of the
  # notes).
  assert types == {"EmptyTensorList": 22, "Const": 44}
  step = graph.step_mask
  assert not (dead & ~step).any()
