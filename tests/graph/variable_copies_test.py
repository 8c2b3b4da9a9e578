"""Tests for tfplace.graph.variable_copies: which dense accesses copy a
variable that the step also gathers from or scatters into."""

import numpy as np

import tfplace  # noqa: F401
import tensorflow as tf

from tfplace.graph.importers import from_tf_graph
from tfplace.graph.variable_copies import copied_variable_bytes
from tfplace.models.registry import build_model

TABLE_BYTES = 50 * 8 * 4  # float32 [50, 8]


def _graph():
  """An embedding table gathered and then read, assigned and decayed
  densely; a dense weight only read and updated densely."""
  graph = tf.Graph()
  with graph.as_default():
    table = tf.Variable(np.ones((50, 8), np.float32), name="table")
    dense = tf.Variable(np.ones((8, 3), np.float32), name="dense")
    rows = tf.gather(table, tf.constant([1, 4, 4]), name="lookup")
    logits = tf.matmul(rows, dense.read_value(), name="logits")
    loss = tf.reduce_sum(logits, name="loss")
    decay = table.assign_sub(0.1 * tf.identity(table.read_value(),
                                               name="table_value"),
                             name="decay")
    step = dense.assign_add(tf.ones((8, 3)), name="step")
    tf.group(decay, step, name="train")
  return graph


def test_dense_accesses_of_a_gathered_variable_copy_it():
  graph = _graph()
  ops = {op.name: op for op in graph.get_operations()}
  reads = [op for op in ops.values() if op.type == "ReadVariableOp"]
  table_reads = [op for op in reads if op.inputs[0].op.name == "table"]
  dense_reads = [op for op in reads if op.inputs[0].op.name == "dense"]
  assert table_reads and dense_reads
  assert all(copied_variable_bytes(op) == TABLE_BYTES for op in table_reads)
  assert copied_variable_bytes(ops["decay"]) == TABLE_BYTES
  # Never gathered or scattered: its reads and updates share its buffer.
  assert all(copied_variable_bytes(op) == 0 for op in dense_reads)
  assert copied_variable_bytes(ops["step"]) == 0
  # The gather itself reads rows, not the table.
  assert copied_variable_bytes(ops["lookup"]) == 0


def test_the_importer_marks_the_copies():
  g = from_tf_graph(_graph(), ["train"], "loss", [], name="copies")
  by_name = {op.name: op for op in g.ops}
  assert by_name["decay"].variant == "copy_on_read"
  assert by_name["decay"].copy_bytes == 2 * TABLE_BYTES
  assert by_name["step"].variant == "" and by_name["step"].copy_bytes == 0
  # A copying read holds its copy while it lives; a plain read shares the
  # variable's buffer.
  held = dict(zip((op.name for op in g.ops), g.activation_bytes))
  copying = [op.name for op in g.ops if op.type == "ReadVariableOp"
             and op.variant == "copy_on_read"]
  plain = [op.name for op in g.ops if op.type == "ReadVariableOp"
           and not op.variant]
  assert copying and plain
  assert all(held[n] >= TABLE_BYTES for n in copying)
  assert all(held[n] == 0 for n in plain)


def test_adams_sparse_update_copies_the_table_and_its_slots():
  # TF's Adam scatters a sparse gradient into both slots, then updates the
  # whole table densely: reads of the table and slots copy them; SGD only
  # gathers and scatters, with no dense access to copy.
  sizes = dict(batch_size=2, seq_len=3, vocab=20, dim=4)
  adam = build_model("calib_embedding", optimizer="adam", **sizes)
  sgd = build_model("calib_embedding", **sizes)
  def copying(graph):
    return [op for op, run in zip(graph.ops, graph.step_mask)
            if run and op.variant == "copy_on_read"]
  assert {op.type for op in copying(adam)} >= {"ReadVariableOp",
                                               "AssignSubVariableOp"}
  assert all(op.copy_bytes == 2 * 20 * 4 * 4 for op in copying(adam))
  assert not copying(sgd)
