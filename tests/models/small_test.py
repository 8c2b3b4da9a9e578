"""Tests for tfplace.models.small: the fast test graphs."""

import math

import tfplace  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TF)
import pytest

from tfplace.models import common
from tfplace.models import small

BUILDERS = [
    (small.build_mlp_towers, small.MlpTowersConfig()),
    (small.build_chain_mlp, small.ChainMlpConfig()),
    (small.build_small_cnn, small.SmallCnnConfig()),
]


def _forward(built, op_type):
  return [op.name for op in built.graph.get_operations()
          if op.type == op_type and not op.name.startswith("gradients/")]


@pytest.mark.parametrize("build,config", BUILDERS)
def test_steps_are_finite_deterministic_and_learn(build, config):
  built = build(config)
  assert len(built.graph.get_operations()) < 500
  losses = common.run_steps(built, num_steps=3)
  assert all(math.isfinite(x) for x in losses)
  assert losses == common.run_steps(build(config), num_steps=3)
  assert losses[2] < losses[0]


def test_towers_are_independent_until_the_head():
  built = small.build_mlp_towers(small.MlpTowersConfig(num_towers=3,
                                                       num_layers=2))
  # 3 towers x 2 layers + 1 head layer.
  assert len(_forward(built, "MatMul")) == 3 * 2 + 1
  add_n = built.graph.get_operation_by_name("head/AddN")
  assert sorted(t.op.name.split("/")[0] for t in add_n.inputs) == [
      "tower_0", "tower_1", "tower_2"]


def test_chain_and_cnn_layer_counts():
  chain = small.build_chain_mlp(small.ChainMlpConfig(num_layers=4))
  assert len(_forward(chain, "MatMul")) == 4 + 1
  cnn = small.build_small_cnn(small.SmallCnnConfig(channels=(4, 4)))
  assert _forward(cnn, "Conv2D") == ["conv_0/Conv2D", "conv_1/Conv2D"]
  # 16x16 -> 8x8 -> 4x4 with 4 channels: 64 features into the dense layer.
  weights = cnn.graph.get_operation_by_name("dense/weights")
  assert weights.get_attr("shape").dim[0].size == 64
