"""Small training graphs for tests and fast experiments (CPU, < 1 s a step).

* ``mlp_towers``: K parallel MLP towers on one input, their outputs summed
  into the loss; scopes ``tower_<k>/layer_<i>/``, then ``head/``. The towers
  are independent, so a good placement on K devices puts one tower on each.
* ``chain_mlp``: one deep MLP, scopes ``layer_<i>/``; a pure chain.
* ``small_cnn``: conv layers (``conv_<i>/``) then a dense layer (``dense/``).

Each uses ``loss:0``, ``train_op`` and ``init`` as the large models do.
With ``placeholder_inputs=True`` the inputs (``inputs``; ``images`` and
``labels`` for the CNN) are placeholders of static shape, fed at run time.
"""

import dataclasses
from typing import Tuple

import tensorflow as tf

from tfplace.models import common

_V1 = tf.compat.v1


@dataclasses.dataclass(frozen=True)
class MlpTowersConfig:
  """Sizes of `mlp_towers`.

  Attributes:
    batch_size: rows per step.
    input_size: input features.
    hidden: units of each hidden layer.
    num_towers: parallel towers (K).
    num_layers: dense+ReLU layers per tower.
    optimizer: optimizer name (see `common.make_optimizer`).
    learning_rate: step size.
    seed: seeds the graph and the data.
    placeholder_inputs: take the input from a float32 placeholder
      ``inputs`` [batch_size, input_size] instead of in-graph random ops.
  """
  batch_size: int = 8
  input_size: int = 16
  hidden: int = 32
  num_towers: int = 4
  num_layers: int = 2
  optimizer: str = "sgd"
  learning_rate: float = 0.01
  seed: int = 1
  placeholder_inputs: bool = False


@dataclasses.dataclass(frozen=True)
class ChainMlpConfig:
  """Sizes of `chain_mlp` (fields as in `MlpTowersConfig`)."""
  batch_size: int = 8
  input_size: int = 16
  hidden: int = 32
  num_layers: int = 6
  optimizer: str = "sgd"
  learning_rate: float = 0.1
  seed: int = 1
  placeholder_inputs: bool = False


@dataclasses.dataclass(frozen=True)
class SmallCnnConfig:
  """Sizes of `small_cnn`.

  Attributes:
    batch_size: images per step.
    image_size: height and width of the square input.
    channels: output channels of each 3x3 conv (stride 2, SAME).
    num_classes: output classes.
    optimizer: optimizer name.
    learning_rate: step size.
    seed: seeds the graph and the data.
    placeholder_inputs: take images and labels from placeholders
      (``images`` float32 [batch, size, size, 3], ``labels`` int32 [batch]).
  """
  batch_size: int = 4
  image_size: int = 16
  channels: Tuple[int, ...] = (8, 16, 16)
  num_classes: int = 10
  optimizer: str = "momentum"
  learning_rate: float = 0.01
  seed: int = 1
  placeholder_inputs: bool = False


def _inputs(config) -> tf.Tensor:
  return common.synthetic_normal([config.batch_size, config.input_size],
                                 [config.seed, 5], "inputs",
                                 config.placeholder_inputs)


def _towers_loss(config: MlpTowersConfig) -> tf.Tensor:
  x = _inputs(config)
  outputs = []
  for k in range(config.num_towers):
    with _V1.variable_scope(f"tower_{k}"):
      y = x
      for i in range(config.num_layers):
        y = common.dense(y, config.hidden, f"layer_{i}",
                         activation=tf.nn.relu)
      outputs.append(y)
  with _V1.variable_scope("head"):
    y = common.dense(tf.add_n(outputs), 1, "out")
    return tf.reduce_mean(tf.square(y - 1.0))


def _chain_loss(config: ChainMlpConfig) -> tf.Tensor:
  y = _inputs(config)
  for i in range(config.num_layers):
    y = common.dense(y, config.hidden, f"layer_{i}", activation=tf.nn.relu)
  y = common.dense(y, 1, "head")
  return tf.reduce_mean(tf.square(y - 1.0))


def _cnn_loss(config: SmallCnnConfig) -> tf.Tensor:
  size = config.image_size
  x = common.synthetic_normal([config.batch_size, size, size, 3],
                               [config.seed, 7], "images",
                               config.placeholder_inputs)
  labels = common.synthetic_tokens([config.batch_size], config.num_classes,
                                   config.seed, name="labels",
                                   placeholder=config.placeholder_inputs)
  for i, channels in enumerate(config.channels):
    with _V1.variable_scope(f"conv_{i}"):
      kernel = common.variable("weights", [3, 3, x.shape[-1], channels])
      x = tf.nn.relu(tf.nn.conv2d(x, kernel, strides=2, padding="SAME"))
  flat = tf.reshape(x, [config.batch_size, -1])
  logits = common.dense(flat, config.num_classes, "dense")
  return common.mean_xent(logits, labels)


def build_mlp_towers(config: MlpTowersConfig) -> common.BuiltGraph:
  """K parallel MLP towers summed into a squared-error loss."""
  common.check_positive(config, ["batch_size", "input_size", "hidden",
                                 "num_towers", "num_layers"])
  return common.build_graph(config, _towers_loss, config.optimizer,
                            config.learning_rate)


def build_chain_mlp(config: ChainMlpConfig) -> common.BuiltGraph:
  """A deep MLP: a chain of dense+ReLU layers."""
  common.check_positive(config, ["batch_size", "input_size", "hidden",
                                 "num_layers"])
  return common.build_graph(config, _chain_loss, config.optimizer,
                            config.learning_rate)


def build_small_cnn(config: SmallCnnConfig) -> common.BuiltGraph:
  """A few strided 3x3 convs and a dense softmax layer."""
  common.check_positive(config, ["batch_size", "image_size", "num_classes"])
  return common.build_graph(config, _cnn_loss, config.optimizer,
                            config.learning_rate)
