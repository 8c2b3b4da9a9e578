"""Inception-V3 (Szegedy et al., CVPR 2016) as a TF1 training step.

The image benchmark of Mirhoseini et al. (ICML 2017): the 94 convolutions of
Inception-V3, each followed by batch normalization (batch statistics, with
moving-average updates run by ``train_op``) and ReLU, global average pooling
and a 1000-way softmax, plus the auxiliary classifier (2 more convs) and L2
weight decay, trained by RMSProp on seeded synthetic images. With a learned
batch-norm scale the step has 11,282 ops (the paper's ~11.4K); without the
scale, aux head and weight decay it would have ~9K. `depth_multiplier` and
`image_size` shrink it for tests (the op count changes with neither).

Name scopes (the expert placer relies on them):
  * ``stem/conv_<i>/``, ``stem/pool_<i>``        the stem;
  * ``mixed_<k>/branch_<j>/conv_<i>/``          inception block k (0..10);
  * ``logits/``                                 pooling and dense;
  * ``aux_logits/``                             the auxiliary classifier;
  * ``weight_decay/``                           the summed L2 penalty;
  * ``loss``, ``gradients/<scope>/...``, ``train_op``, ``init``.
"""

import dataclasses
from typing import List, Sequence, Tuple

import tensorflow as tf

from tfplace.errors import GraphImportError
from tfplace.models import common

_V1 = tf.compat.v1

# One conv: (output channels, kernel height, kernel width, stride, padding).
ConvSpec = Tuple[int, int, int, int, str]


def _c(out: int, kh: int, kw: int, stride: int = 1,
       padding: str = "SAME") -> ConvSpec:
  return (out, kh, kw, stride, padding)


@dataclasses.dataclass(frozen=True)
class InceptionV3Config:
  """Inception-V3 sizes; the defaults are the benchmark's (about 11.4K ops).

  Attributes:
    batch_size: images per step.
    image_size: height and width of the square input (at least 75).
    num_classes: output classes.
    depth_multiplier: scales every conv's channel count (1.0: the paper's).
    bn_decay: decay of the batch-norm moving averages.
    bn_scale: learn a batch-norm scale (gamma) per channel.
    aux_logits: add the auxiliary classifier on mixed_7 (weight 0.4).
    weight_decay: L2 penalty on every conv and dense kernel (0: none).
    optimizer: "sgd", "adam", "momentum" or "rmsprop".
    learning_rate: the optimizer's step size.
    seed: seeds the graph and the synthetic data.
  """
  batch_size: int = 32
  image_size: int = 299
  num_classes: int = 1000
  depth_multiplier: float = 1.0
  bn_decay: float = 0.9997
  bn_scale: bool = True
  aux_logits: bool = True
  weight_decay: float = 4e-5
  optimizer: str = "rmsprop"
  learning_rate: float = 0.045
  seed: int = 1


class _Builder:
  """Builds the network, collecting the batch-norm update ops."""

  def __init__(self, config: InceptionV3Config):
    self.config = config
    self.updates: List[tf.Operation] = []
    self.penalties: List[tf.Tensor] = []

  def conv(self, x: tf.Tensor, spec: ConvSpec, scope: str) -> tf.Tensor:
    """Conv (no bias) -> batch norm (batch statistics) -> ReLU."""
    out, kh, kw, stride, padding = spec
    out = max(1, int(out * self.config.depth_multiplier))
    with _V1.variable_scope(scope):
      weights = self.kernel([kh, kw, x.shape[-1], out])
      y = tf.nn.conv2d(x, weights, strides=stride, padding=padding)
      beta = common.variable("beta", [out], constant=0.0)
      gamma = (common.variable("gamma", [out], constant=1.0)
               if self.config.bn_scale else tf.ones([out]))
      y, mean, var = _V1.nn.fused_batch_norm(
          y, gamma, beta, epsilon=1e-3, is_training=True)[:3]
      self._track(mean, "moving_mean", 0.0)
      self._track(var, "moving_variance", 1.0)
      return tf.nn.relu(y)

  def kernel(self, shape: Sequence[int]) -> tf.Variable:
    """A weight variable, L2-penalized when weight_decay > 0."""
    weights = common.variable("weights", shape)
    if self.config.weight_decay > 0:
      self.penalties.append(tf.nn.l2_loss(weights, name="l2"))
    return weights

  def _track(self, stat: tf.Tensor, name: str, start: float) -> None:
    moving = common.variable(name, stat.shape, constant=start,
                             trainable=False)
    delta = (moving.read_value() - stat) * (1.0 - self.config.bn_decay)
    self.updates.append(moving.assign_sub(delta).op)

  def branch(self, x: tf.Tensor, specs: Sequence[ConvSpec],
             scope: str) -> tf.Tensor:
    with _V1.variable_scope(scope):
      for i, spec in enumerate(specs):
        x = self.conv(x, spec, f"conv_{i}")
    return x

  def pool_branch(self, x: tf.Tensor, out: int, scope: str) -> tf.Tensor:
    with _V1.variable_scope(scope):
      x = tf.nn.avg_pool2d(x, 3, 1, "SAME")
      return self.conv(x, _c(out, 1, 1), "conv_0")

  def split_branch(self, x: tf.Tensor, specs: Sequence[ConvSpec],
                   scope: str) -> tf.Tensor:
    """Convs `specs`, then parallel 1x3 and 3x1 convs, concatenated."""
    with _V1.variable_scope(scope):
      for i, spec in enumerate(specs):
        x = self.conv(x, spec, f"conv_{i}")
      n = len(specs)
      return tf.concat([self.conv(x, _c(384, 1, 3), f"conv_{n}"),
                        self.conv(x, _c(384, 3, 1), f"conv_{n + 1}")], 3)

  def stem(self, x: tf.Tensor) -> tf.Tensor:
    specs = [_c(32, 3, 3, 2, "VALID"), _c(32, 3, 3, 1, "VALID"),
             _c(64, 3, 3), None, _c(80, 1, 1, 1, "VALID"),
             _c(192, 3, 3, 1, "VALID"), None]
    with _V1.variable_scope("stem"):
      for i, spec in enumerate(specs):
        if spec is None:
          x = tf.nn.max_pool2d(x, 3, 2, "VALID", name=f"pool_{i}")
        else:
          x = self.conv(x, spec, f"conv_{i}")
    return x

  def block_a(self, x: tf.Tensor, pool_out: int, scope: str) -> tf.Tensor:
    with _V1.variable_scope(scope):
      return tf.concat([
          self.branch(x, [_c(64, 1, 1)], "branch_0"),
          self.branch(x, [_c(48, 1, 1), _c(64, 5, 5)], "branch_1"),
          self.branch(x, [_c(64, 1, 1), _c(96, 3, 3), _c(96, 3, 3)],
                      "branch_2"),
          self.pool_branch(x, pool_out, "branch_3")], 3)

  def reduce_a(self, x: tf.Tensor, scope: str) -> tf.Tensor:
    with _V1.variable_scope(scope):
      return tf.concat([
          self.branch(x, [_c(384, 3, 3, 2, "VALID")], "branch_0"),
          self.branch(x, [_c(64, 1, 1), _c(96, 3, 3),
                          _c(96, 3, 3, 2, "VALID")], "branch_1"),
          tf.nn.max_pool2d(x, 3, 2, "VALID", name="branch_2")], 3)

  def block_b(self, x: tf.Tensor, mid: int, scope: str) -> tf.Tensor:
    with _V1.variable_scope(scope):
      return tf.concat([
          self.branch(x, [_c(192, 1, 1)], "branch_0"),
          self.branch(x, [_c(mid, 1, 1), _c(mid, 1, 7), _c(192, 7, 1)],
                      "branch_1"),
          self.branch(x, [_c(mid, 1, 1), _c(mid, 7, 1), _c(mid, 1, 7),
                          _c(mid, 7, 1), _c(192, 1, 7)], "branch_2"),
          self.pool_branch(x, 192, "branch_3")], 3)

  def reduce_b(self, x: tf.Tensor, scope: str) -> tf.Tensor:
    with _V1.variable_scope(scope):
      return tf.concat([
          self.branch(x, [_c(192, 1, 1), _c(320, 3, 3, 2, "VALID")],
                      "branch_0"),
          self.branch(x, [_c(192, 1, 1), _c(192, 1, 7), _c(192, 7, 1),
                          _c(192, 3, 3, 2, "VALID")], "branch_1"),
          tf.nn.max_pool2d(x, 3, 2, "VALID", name="branch_2")], 3)

  def block_c(self, x: tf.Tensor, scope: str) -> tf.Tensor:
    with _V1.variable_scope(scope):
      return tf.concat([
          self.branch(x, [_c(320, 1, 1)], "branch_0"),
          self.split_branch(x, [_c(384, 1, 1)], "branch_1"),
          self.split_branch(x, [_c(448, 1, 1), _c(384, 3, 3)], "branch_2"),
          self.pool_branch(x, 192, "branch_3")], 3)

  def features(self, x: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
    """The stem and the 11 mixed blocks; also returns mixed_7's output."""
    x = self.stem(x)
    for k, pool_out in enumerate([32, 64, 64]):
      x = self.block_a(x, pool_out, f"mixed_{k}")
    x = self.reduce_a(x, "mixed_3")
    for k, mid in enumerate([128, 160, 160, 192]):
      x = self.block_b(x, mid, f"mixed_{k + 4}")
    aux_input = x
    x = self.reduce_b(x, "mixed_8")
    x = self.block_c(x, "mixed_9")
    return self.block_c(x, "mixed_10"), aux_input

  def dense(self, x: tf.Tensor, num_classes: int) -> tf.Tensor:
    weights = self.kernel([x.shape[-1], num_classes])
    bias = common.variable("bias", [num_classes], constant=0.0)
    return tf.matmul(x, weights) + bias

  def aux_logits(self, x: tf.Tensor, num_classes: int) -> tf.Tensor:
    """The auxiliary head: 5x5/3 avg pool, 1x1 and 5x5 convs, dense."""
    with _V1.variable_scope("aux_logits"):
      padding = "VALID" if x.shape[1] >= 5 else "SAME"
      x = tf.nn.avg_pool2d(x, 5, 3, padding)
      x = self.conv(x, _c(128, 1, 1), "conv_0")
      k = min(5, x.shape[1])
      x = self.conv(x, _c(768, k, k, 1, "VALID"), "conv_1")
      return self.dense(tf.reduce_mean(x, axis=[1, 2]), num_classes)

  def loss(self, config: InceptionV3Config) -> tf.Tensor:
    size = config.image_size
    images = tf.random.stateless_normal(
        [config.batch_size, size, size, 3], seed=[config.seed, 3],
        name="images")
    labels = common.synthetic_tokens([config.batch_size], config.num_classes,
                                     config.seed, name="labels")
    x, aux_input = self.features(images)
    with _V1.variable_scope("logits"):
      logits = self.dense(tf.reduce_mean(x, axis=[1, 2]), config.num_classes)
      total = common.mean_xent(logits, labels)
    if config.aux_logits:
      aux = self.aux_logits(aux_input, config.num_classes)
      total += 0.4 * common.mean_xent(aux, labels)
    if self.penalties:
      with tf.name_scope("weight_decay"):
        total += config.weight_decay * tf.add_n(self.penalties)
    return total


def build(config: InceptionV3Config) -> common.BuiltGraph:
  """Builds the Inception-V3 training step described by `config`."""
  common.check_positive(config, ["batch_size", "image_size", "num_classes",
                                 "depth_multiplier"])
  if config.image_size < 75:
    raise GraphImportError(
        f"Inception-V3 needs image_size >= 75, got {config.image_size}")
  builder = _Builder(config)
  return common.build_graph(config, builder.loss, config.optimizer,
                            config.learning_rate,
                            update_ops=lambda: builder.updates)
