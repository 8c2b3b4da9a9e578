"""A small ResNet (He et al., CVPR 2016) for CIFAR-sized images.

A 3x3 stem convolution, then `len(widths)` stages of `blocks_per_stage`
basic residual blocks (3x3 conv, batch norm, ReLU, 3x3 conv, batch norm,
shortcut added, ReLU; the first block of every stage but the first halves
the resolution and projects the shortcut with a strided 1x1 conv), global
average pooling, a dense layer and softmax cross-entropy. Batch norm is
`FusedBatchNormV3` in training mode (batch statistics).

Name scopes: ``stem/``, ``stage_<s>/block_<b>/``, ``head/``.
"""

import dataclasses
from typing import Tuple

import tensorflow as tf

from tfplace.errors import GraphImportError
from tfplace.models import common

_V1 = tf.compat.v1


@dataclasses.dataclass(frozen=True)
class ResnetLikeConfig:
  """Sizes of `resnet_like`.

  Attributes:
    batch_size: images per step.
    image_size: height and width of the square RGB input.
    widths: channels of each stage.
    blocks_per_stage: residual blocks per stage.
    num_classes: output classes.
    optimizer: optimizer name (see `common.make_optimizer`).
    learning_rate: step size.
    seed: seeds the graph and the data.
  """
  batch_size: int = 8
  image_size: int = 32
  widths: Tuple[int, ...] = (16, 32, 64)
  blocks_per_stage: int = 2
  num_classes: int = 10
  optimizer: str = "momentum"
  learning_rate: float = 0.01
  seed: int = 1


def conv_bn(x: tf.Tensor, channels: int, kernel: int, stride: int,
            scope: str, relu: bool = True) -> tf.Tensor:
  """Conv (no bias), fused batch norm in training mode, optional ReLU."""
  with _V1.variable_scope(scope):
    w = common.variable("weights", [kernel, kernel, x.shape[-1], channels])
    y = tf.nn.conv2d(x, w, strides=stride, padding="SAME")
    scale = common.variable("bn_scale", [channels], constant=1.0)
    offset = common.variable("bn_offset", [channels], constant=0.0)
    y, _, _ = _V1.nn.fused_batch_norm(y, scale, offset, is_training=True)
    return tf.nn.relu(y) if relu else y


def _block(x: tf.Tensor, channels: int, stride: int, scope: str) -> tf.Tensor:
  with _V1.variable_scope(scope):
    y = conv_bn(x, channels, 3, stride, "conv_a")
    y = conv_bn(y, channels, 3, 1, "conv_b", relu=False)
    shortcut = x
    if stride != 1 or x.shape[-1] != channels:
      shortcut = conv_bn(x, channels, 1, stride, "project", relu=False)
    return tf.nn.relu(y + shortcut)


def _loss(config: ResnetLikeConfig) -> tf.Tensor:
  size = config.image_size
  x = tf.random.stateless_normal([config.batch_size, size, size, 3],
                                 seed=[config.seed, 7], name="images")
  labels = common.synthetic_tokens([config.batch_size], config.num_classes,
                                   config.seed, name="labels")
  x = conv_bn(x, config.widths[0], 3, 1, "stem")
  for s, channels in enumerate(config.widths):
    for b in range(config.blocks_per_stage):
      stride = 2 if (s > 0 and b == 0) else 1
      x = _block(x, channels, stride, f"stage_{s}/block_{b}")
  with _V1.variable_scope("head"):
    pooled = tf.reduce_mean(x, axis=[1, 2])
    w = common.variable("weights", [pooled.shape[-1], config.num_classes])
    b = common.variable("bias", [config.num_classes], constant=0.0)
    return common.mean_xent(tf.matmul(pooled, w) + b, labels)


def build(config: ResnetLikeConfig) -> common.BuiltGraph:
  """Builds the ResNet-like training step described by `config`."""
  common.check_positive(config, ["batch_size", "image_size",
                                 "blocks_per_stage", "num_classes"])
  if not config.widths or min(config.widths) < 1:
    raise GraphImportError("ResnetLikeConfig.widths must be positive "
                           f"channel counts, got {config.widths!r}")
  return common.build_graph(config, _loss, config.optimizer,
                            config.learning_rate)
