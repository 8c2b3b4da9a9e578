"""Tests for tfplace.models.inception_v3 on a shrunk network.

The op count does not depend on the image size or the channel widths, so
the shrunk build has the full structure (about 11K ops; ~5-10 s to build).
"""

import math
import os

import tfplace  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TF)
import pytest

from tfplace.errors import GraphImportError
from tfplace.models import common
from tfplace.models import inception_v3

TINY = inception_v3.InceptionV3Config(batch_size=2, image_size=75,
                                      num_classes=10, depth_multiplier=0.0625)


@pytest.fixture(scope="module")
def tiny():
  return inception_v3.build(TINY)


def _count(built, op_type):
  return sum(op.type == op_type for op in built.graph.get_operations())


def test_tiny_step_is_finite_and_deterministic(tiny):
  first = common.run_steps(tiny, num_steps=2)
  assert all(math.isfinite(x) for x in first)
  assert first == common.run_steps(inception_v3.build(TINY), num_steps=2)


def test_has_94_convs_plus_two_in_the_aux_head(tiny):
  assert _count(tiny, "Conv2D") == 94 + 2
  assert _count(tiny, "FusedBatchNormV3") == 96
  assert _count(tiny, "FusedBatchNormGradV3") == 96
  # Two moving averages per batch norm, run by train_op.
  assert _count(tiny, "AssignSubVariableOp") == 2 * 96
  train = tiny.graph.get_operation_by_name(tiny.train_op)
  assert train.type == "NoOp"


def test_scopes(tiny):
  names = [op.name for op in tiny.graph.get_operations()]
  for scope in ["stem/conv_0/", "mixed_0/branch_3/conv_0/",
                "mixed_10/branch_2/conv_3/", "aux_logits/conv_1/",
                "logits/", "weight_decay/", "gradients/mixed_5/"]:
    assert any(n.startswith(scope) for n in names), scope
  assert not any(n.startswith("mixed_11/") for n in names)


def test_small_images_are_rejected():
  with pytest.raises(GraphImportError, match="75"):
    inception_v3.build(inception_v3.InceptionV3Config(image_size=64))


@pytest.mark.skipif(not os.environ.get("TFPLACE_FULL_MODELS"),
                    reason="same op count as the tiny build; slow")
def test_full_size_op_count_is_near_11400():
  built = inception_v3.build(inception_v3.InceptionV3Config())
  count = len(built.graph.get_operations())
  assert abs(count - 11400) / 11400 < 0.05, count
