"""Tests for tfplace.graph.lowered_loops: the nodes a session runs for a
While, mapped to the rows of its ControlFlowCost."""

import tfplace  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TF)

from tfplace.graph.lowered_loops import body_row, loop_of
from tfplace.graph.op_graph import BodyOp, ControlFlowCost

BODY = ControlFlowCost((
    BodyOp("rnn/while/MatMul", "MatMul", 100.0, 64, 10.0),
    BodyOp("rnn/while/add_1", "AddV2", 4.0, 48, 10.0),
    BodyOp("rnn/while/inner/Tanh", "Tanh", 4.0, 32, 30.0),
    BodyOp("rnn/while/inner/(loop frame)", "Merge", 0.0, 0, 40.0),
    BodyOp("rnn/while/(loop frame)", "Merge", 0.0, 0, 33.0),
    BodyOp("rnn/while/(loop frame)", "Switch", 0.0, 0, 33.0),
), trip_count=10)


def test_the_loop_is_the_longest_name_that_prefixes_the_node():
  loops = {"rnn/while": None, "rnn/while_1": None,
           "gradients/rnn/while_grad/rnn/while_grad": None}
  assert loop_of("rnn/while/body/_1/MatMul", loops) == "rnn/while"
  assert loop_of("rnn/while_1/merge/_3", loops) == "rnn/while_1"
  assert loop_of("Func/rnn/while/body/_1/input/_7", loops) == "rnn/while"
  assert loop_of(
      "gradients/rnn/while_grad/rnn/while_grad/body/_9/gradients/AddN",
      loops) == "gradients/rnn/while_grad/rnn/while_grad"
  assert loop_of("rnn/while_2/merge/_3", loops) is None
  assert loop_of("rnn/dense/MatMul", loops) is None


def test_body_nodes_map_to_their_rows_by_path():
  assert body_row("rnn/while/body/_1/MatMul", "_MklMatMul",
                  BODY) is BODY.ops[0]
  # The inlining made "add_1" unique as "add_1_0".
  assert body_row("rnn/while/body/_1/add_1_0", "AddV2", BODY) is BODY.ops[1]
  assert body_row("rnn/while/body/_1/inner/body/_4/Tanh", "Tanh",
                  BODY) is BODY.ops[2]
  assert body_row("rnn/while/body/_1/Sigmoid", "Sigmoid", BODY) is None


def test_frame_nodes_map_to_the_innermost_loops_frame_row():
  assert body_row("rnn/while/merge/_12", "Merge", BODY) is BODY.ops[4]
  assert body_row("rnn/while/body/_1/inner/merge/_5", "Merge",
                  BODY) is BODY.ops[3]
  assert body_row("rnn/while/x_switch/_8", "Switch", BODY) is BODY.ops[5]
  # No row of that type in the frame.
  assert body_row("rnn/while/exit/_2", "Exit", BODY) is None
