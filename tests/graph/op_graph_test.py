"""Tests for OpGraph on a hand-made graph whose answers are worked by hand.

    w (VarHandleOp) ──▶ read ──▶ mm ──▶ loss ──▶ grad ──▶ update ◀── w
    x (Const) ─────────────────▶ mm
    init_value ──▶ assign ◀── w        (initialization: not in the step)
    x ┈┈(control)┈┈▶ loss
"""

import numpy as np
import pytest

from tfplace.errors import GraphImportError
from tfplace.graph.op_graph import Edge, Op, OpGraph, StepFetches


def _op(name, op_type, nbytes=4, **kw):
  return Op(name, op_type, ((1,),), ("float32",), (nbytes,), **kw)


@pytest.fixture
def graph():
  ops = [_op("w", "VarHandleOp", 8, param_bytes=400),    # 0
         _op("read", "ReadVariableOp", 400),              # 1
         _op("x", "Const", 40),                           # 2
         _op("mm", "MatMul", 40, flops=800.0),            # 3
         _op("loss", "Sum", 4),                           # 4
         _op("grad", "MatMul", 400, flops=800.0),         # 5
         _op("update", "AssignSubVariableOp", 0),         # 6
         _op("init_value", "Const", 400),                 # 7
         _op("assign", "AssignVariableOp", 0)]            # 8
  edges = [Edge(0, 1, 0, 8), Edge(1, 3, 0, 400), Edge(2, 3, 0, 40),
           Edge(3, 4, 0, 40), Edge(4, 5, 0, 4), Edge(5, 6, 0, 400),
           Edge(0, 6, 0, 8), Edge(0, 8, 0, 8), Edge(7, 8, 0, 400),
           Edge(2, 4, -1, 0), Edge(3, 5, 0, 40)]
  groups = np.array([0, 1, 2, 3, 4, 5, 0, 7, 0])  # w, update, assign together
  return OpGraph(ops, edges, graph_def=None, name="toy",
                 fetches=StepFetches(train_ops=("update",), loss="loss:0",
                                     init_ops=("assign",)),
                 colocation_groups=groups)


def test_topological_order_respects_every_edge(graph):
  position = {int(op): k for k, op in enumerate(graph.topo_order)}
  assert sorted(position) == list(range(9))
  for e in graph.edges:
    assert position[e.src] < position[e.dst]


def test_csr_views_list_successors_and_predecessors(graph):
  ptr, succ = graph.successors_csr
  assert sorted(succ[ptr[0]:ptr[1]].tolist()) == [1, 6, 8]   # w's consumers
  ptr, pred = graph.predecessors_csr
  assert sorted(pred[ptr[4]:ptr[5]].tolist()) == [2, 3]      # loss: mm + ^x


def test_tensors_have_unique_consumers_and_skip_control_edges(graph):
  producer, size, ptr, consumers = graph.tensors
  # 8 data tensors: w:0, read:0, x:0, mm:0, loss:0, grad:0, init_value:0;
  # w:0 has three consumers, mm:0 two (loss, grad).
  assert producer.tolist() == [0, 1, 2, 3, 4, 5, 7]
  assert size.tolist() == [8, 400, 40, 40, 4, 400, 400]
  t_w, t_mm = 0, 3
  assert sorted(consumers[ptr[t_w]:ptr[t_w + 1]].tolist()) == [1, 6, 8]
  assert sorted(consumers[ptr[t_mm]:ptr[t_mm + 1]].tolist()) == [4, 5]


def test_colocation_groups_are_renumbered_in_order(graph):
  assert graph.group_of.tolist() == [0, 1, 2, 3, 4, 5, 0, 6, 0]
  assert graph.colocation_groups[0] == [0, 6, 8]
  assert graph.num_colocation_groups == 7


def test_step_mask_excludes_the_initialization_subgraph(graph):
  # The step runs the ancestors of `update` and `loss`: not init_value/assign.
  assert graph.step_mask.tolist() == [True] * 7 + [False, False]


def test_step_mask_is_everything_without_fetches(graph):
  bare = OpGraph(graph.ops, graph.edges, graph_def=None)
  assert bare.step_mask.all()


def test_constants_are_resident_with_the_variables(graph):
  # TF's Const kernel holds its tensor for the session's life: x (40 B) and
  # the initializer's init_value (400 B), in whole 256-byte granules.
  assert list(graph.resident_bytes) == [400, 0, 256, 0, 0, 0, 0, 512, 0]
  assert list(graph.param_bytes) == [400, 0, 0, 0, 0, 0, 0, 0, 0]


def test_per_op_arrays_and_summary(graph):
  assert graph.param_bytes.sum() == 400
  assert graph.input_bytes[3] == 440          # read (400) + x (40)
  assert graph.flops.sum() == 1600.0
  summary = graph.summary()
  assert summary["num_ops"] == 9
  assert summary["num_control_edges"] == 1
  assert summary["num_multi_op_groups"] == 1
  assert summary["largest_group"] == 3


def test_activations_leave_out_variable_buffers_and_round_allocations(graph):
  # The handle and the read are the variable's own buffer (its 400
  # parameter bytes), the constants' tensors are resident; every other
  # output takes whole 256-byte granules.
  assert list(graph.activation_bytes) == [0, 0, 0, 256, 256, 512, 0, 0, 0]
  assert list(graph.output_bytes[:2]) == [8, 400]  # Costs still see them.
  ref = OpGraph([_op("v", "VariableV2", 400, param_bytes=400),
                 _op("v/read", "Identity", 400), _op("y", "Identity", 400)],
                [Edge(0, 1, 0, 400), Edge(1, 2, 0, 400)], graph_def=None)
  assert list(ref.activation_bytes) == [0, 0, 512]


def test_fingerprint_depends_on_structure_only(graph):
  same = OpGraph(graph.ops, graph.edges, graph_def=None, name="other")
  fewer = OpGraph(graph.ops, graph.edges[:-1], graph_def=None)
  assert same.fingerprint == graph.fingerprint
  assert fewer.fingerprint != graph.fingerprint


def test_cycle_that_is_not_a_loop_is_rejected():
  ops = [_op("a", "Neg"), _op("b", "Neg")]
  g = OpGraph(ops, [Edge(0, 1, 0, 4), Edge(1, 0, 0, 4)], graph_def=None)
  with pytest.raises(GraphImportError, match="cycle"):
    g.topo_order


def test_empty_graph_and_duplicate_names_are_rejected():
  with pytest.raises(GraphImportError, match="no ops"):
    OpGraph([], [], graph_def=None)
  with pytest.raises(GraphImportError, match="duplicate"):
    OpGraph([_op("a", "Neg"), _op("a", "Neg")], [], graph_def=None)
