"""Tests for tfplace.models.rnnlm on tiny sizes (and the full op count)."""

import math

import tfplace  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TF)
import pytest

from tfplace.errors import GraphImportError
from tfplace.models import common
from tfplace.models import rnnlm

TINY = rnnlm.RnnlmConfig(batch_size=2, num_steps=3, hidden=8, vocab=20)


def _names(built):
  return [op.name for op in built.graph.get_operations()]


def test_tiny_step_is_finite_deterministic_and_learns():
  first = common.run_steps(rnnlm.build(TINY), num_steps=3)
  again = common.run_steps(rnnlm.build(TINY), num_steps=3)
  assert first == again
  assert all(math.isfinite(x) for x in first)
  assert first[2] < first[0]


def test_near_zero_weights_give_uniform_prediction_loss():
  # Logits are ~0, so the cross-entropy is log(vocab) = log(20) = 2.9957.
  config = rnnlm.RnnlmConfig(batch_size=2, num_steps=3, hidden=8, vocab=20,
                             init_scale=1e-4)
  (loss,) = common.run_steps(rnnlm.build(config))
  assert loss == pytest.approx(math.log(20), abs=1e-4)


def test_unrolled_with_expected_scopes():
  built = rnnlm.build(TINY)
  names = _names(built)
  types = {op.type for op in built.graph.get_operations()}
  assert not types & {"While", "StatelessWhile", "Enter", "LoopCond"}
  for layer in range(2):
    for t in range(3):
      assert f"lstm_{layer}/t_{t}/MatMul" in names
  assert "lstm_0/t_3/MatMul" not in names
  for scope in ["embedding/", "softmax/", "gradients/lstm_1/",
                "gradients/embedding/"]:
    assert any(n.startswith(scope) for n in names), scope
  assert (built.loss, built.train_op, built.init_op) == (
      "loss:0", "train_op", "init")


def test_dropout_adds_ops_and_still_runs():
  config = rnnlm.RnnlmConfig(batch_size=2, num_steps=3, hidden=8, vocab=20,
                             keep_prob=0.5)
  built = rnnlm.build(config)
  assert len(_names(built)) > len(_names(rnnlm.build(TINY)))
  assert all(math.isfinite(x) for x in common.run_steps(built))


def test_bad_size_is_rejected():
  with pytest.raises(GraphImportError, match="num_steps"):
    rnnlm.build(rnnlm.RnnlmConfig(num_steps=0))


def test_full_size_op_count_is_near_5300():
  count = len(rnnlm.build(rnnlm.RnnlmConfig()).graph.get_operations())
  assert abs(count - 5300) / 5300 < 0.05, count
