"""Tests for tfplace.models.nmt on tiny sizes (full size: TFPLACE_FULL_MODELS)."""

import math
import os

import tfplace  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TF)
import pytest

from tfplace.models import common
from tfplace.models import nmt

TINY = nmt.NmtConfig(batch_size=2, src_len=3, tgt_len=2, hidden=8,
                     num_layers=3, src_vocab=20, tgt_vocab=30)


@pytest.fixture(scope="module")
def tiny():
  return nmt.build(TINY)


def test_tiny_step_is_finite_and_deterministic(tiny):
  first = common.run_steps(tiny, num_steps=2)
  assert all(math.isfinite(x) for x in first)
  assert first == common.run_steps(nmt.build(TINY), num_steps=2)


def test_near_zero_weights_give_uniform_prediction_loss():
  config = nmt.NmtConfig(batch_size=2, src_len=2, tgt_len=2, hidden=4,
                         num_layers=2, src_vocab=7, tgt_vocab=30,
                         init_scale=1e-4)
  (loss,) = common.run_steps(nmt.build(config))
  assert loss == pytest.approx(math.log(30), abs=1e-4)


def test_scopes_and_one_cell_per_layer_and_step(tiny):
  names = [op.name for op in tiny.graph.get_operations()]
  matmuls = {n for n in names if n.endswith("/MatMul") and "/t_" in n
             and not n.startswith("gradients/")}
  encoder = {f"encoder/layer_0/{d}/t_{t}/MatMul" for d in ("fw", "bw")
             for t in range(3)}
  encoder |= {f"encoder/layer_{k}/t_{t}/MatMul" for k in (1, 2)
              for t in range(3)}
  decoder = {f"decoder/layer_{k}/t_{t}/MatMul" for k in range(3)
             for t in range(2)}
  attention = {f"attention/t_{t}/MatMul" for t in range(2)}
  assert matmuls - {n + "_1" for n in attention} == encoder | decoder | (
      attention)
  for scope in ["encoder/embedding/", "decoder/embedding/",
                "attention/memory/", "softmax/", "gradients/attention/",
                "gradients/encoder/layer_0/bw/"]:
    assert any(n.startswith(scope) for n in names), scope
  types = {op.type for op in tiny.graph.get_operations()}
  assert not types & {"While", "StatelessWhile", "Enter", "LoopCond"}


def test_residual_only_from_third_layer(tiny):
  graph = tiny.graph
  names = {op.name for op in graph.get_operations()}
  for side in ("encoder", "decoder"):
    assert f"{side}/layer_2/t_1/residual" in names
    assert f"{side}/layer_1/t_1/residual" not in names
  assert graph.get_operation_by_name("decoder/layer_2/t_1/residual").type == (
      "AddV2")


@pytest.mark.skipif(not os.environ.get("TFPLACE_FULL_MODELS"),
                    reason="full NMT takes ~10-15 s to build")
def test_full_size_op_count_is_near_22500():
  count = len(nmt.build(nmt.NmtConfig()).graph.get_operations())
  assert abs(count - 22500) / 22500 < 0.05, count
