"""Tests for tfplace.graph.colocation on hand-made graphs."""

import tfplace  # noqa: F401

from tfplace.graph.colocation import colocation_groups
from tfplace.graph.op_graph import Edge, Op


def _op(name, op_type="Identity", dtypes=("float32",), coloc=()):
  return Op(name=name, type=op_type, output_dtypes=dtypes,
            output_bytes=(4,) * len(dtypes), colocation_names=coloc)


def _groups(ops, edges):
  g = colocation_groups(ops, edges)
  names = [op.name for op in ops]
  out = {}
  for name, gid in zip(names, g):
    out.setdefault(int(gid), set()).add(name)
  return sorted(sorted(s) for s in out.values())


def test_class_attr_joins_ops():
  ops = [_op("a"), _op("b", coloc=("a",)), _op("c")]
  edges = [Edge(0, 1, 0, 4), Edge(1, 2, 0, 4)]
  assert _groups(ops, edges) == [["a", "b"], ["c"]]


def test_resource_edge_joins_consumer_with_handle():
  ops = [_op("v", "VarHandleOp", ("resource",)), _op("r", "ReadVariableOp"),
         _op("m", "MatMul"), _op("u", "AssignAddVariableOp", ())]
  edges = [Edge(0, 1, 0, 8), Edge(1, 2, 0, 4), Edge(0, 3, 0, 8),
           Edge(2, 3, 0, 4)]
  assert _groups(ops, edges) == [["m"], ["r", "u", "v"]]


def test_dataset_edges_join_the_pipeline_with_its_iterator():
  # TensorSliceDataset -> BatchDatasetV2 -> MakeIterator <- IteratorV2
  # -> IteratorGetNext -> MatMul: the float batch may move, a dataset not.
  ops = [_op("const", "Const"),
         _op("slices", "TensorSliceDataset", ("variant",)),
         _op("batch", "BatchDatasetV2", ("variant",)),
         _op("it", "IteratorV2", ("resource",)),
         _op("make", "MakeIterator", ()),
         _op("next", "IteratorGetNext"), _op("m", "MatMul")]
  edges = [Edge(0, 1, 0, 4), Edge(1, 2, 0, 8), Edge(2, 4, 0, 8),
           Edge(3, 4, 0, 8), Edge(3, 5, 0, 8), Edge(5, 6, 0, 4)]
  assert _groups(ops, edges) == [["batch", "it", "make", "next", "slices"],
                                 ["const"], ["m"]]


def test_ref_edge_joins_assign_not_reader():
  ops = [_op("v", "VariableV2", ("float32_ref",)), _op("a", "Assign"),
         _op("m", "MatMul"), _op("apply", "ApplyGradientDescent")]
  edges = [Edge(0, 1, 0, 4), Edge(0, 2, 0, 4), Edge(0, 3, 0, 4)]
  assert _groups(ops, edges) == [["a", "apply", "v"], ["m"]]


def test_control_edges_do_not_join():
  ops = [_op("v", "VarHandleOp", ("resource",)), _op("n", "NoOp", ())]
  assert _groups(ops, [Edge(0, 1, -1, 0)]) == [["n"], ["v"]]


def test_tf1_loop_frame_is_one_group():
  names = ["x", "enter", "merge", "less", "cond", "switch", "body", "next",
           "exit", "out", "limit"]
  types = ["Const", "Enter", "Merge", "Less", "LoopCond", "Switch", "AddV2",
           "NextIteration", "Exit", "Square", "Const"]
  ops = [_op(n, t) for n, t in zip(names, types)]
  i = {n: k for k, n in enumerate(names)}

  def e(a, b, out=0):
    return Edge(i[a], i[b], out, 4)

  edges = [e("x", "enter"), e("enter", "merge"), e("next", "merge"),
           e("merge", "less"), e("limit", "less"), e("less", "cond"),
           e("merge", "switch"), e("cond", "switch"), e("switch", "body", 1),
           e("body", "next"), e("switch", "exit", 0), e("exit", "out")]
  # "limit" is outside the loop but feeds an op inside: it stays apart.
  assert _groups(ops, edges) == [
      ["body", "cond", "enter", "exit", "less", "merge", "next", "switch"],
      ["limit"], ["out"], ["x"]]


def test_functional_loop_joins_its_producers_and_consumers_only():
  # x -> while -> y -> z; c -> while (control only): a tensor into or out of
  # the loop ties both ends; one op further, or a control edge, does not.
  ops = [_op("w", "VarHandleOp", ("resource",)), _op("x", "ReadVariableOp"),
         _op("loop", "StatelessWhile", ("float32", "float32")), _op("y"),
         _op("z"), _op("c", "NoOp", ()), _op("other", "Square")]
  edges = [Edge(0, 1, 0, 4), Edge(1, 2, 0, 4), Edge(2, 3, 1, 4),
           Edge(3, 4, 0, 4), Edge(5, 2, -1, 0), Edge(1, 6, 0, 4)]
  # The read joins its variable (a resource edge), so the loop brings both.
  assert _groups(ops, edges) == [["c"], ["loop", "w", "x", "y"], ["other"],
                                 ["z"]]
