"""A random layered DAG of dense and element-wise blocks (a training step).

`num_layers` layers of `width` nodes, each a [batch, hidden] tensor. A node
of layer l > 0 reads 1-3 nodes of the two layers before it (seeded choice),
combines them (a sum, or a concatenation projected back by a dense layer)
and applies one block drawn from: dense + ReLU, tanh, a sigmoid gate
(x * sigmoid(y)), layer norm, a residual dense + tanh. Layer 0 projects one
seeded random input. The loss is the mean square of the last layer's sum.
No placer or cost model was tuned on its shapes: it stands for "a graph
nobody has seen".

Name scopes: ``node_<l>_<i>/``, ``head``.
"""

import dataclasses
from typing import List

import numpy as np
import tensorflow as tf

from tfplace.models import common

_V1 = tf.compat.v1

BLOCKS = ("dense_relu", "tanh", "gate", "norm", "residual")


@dataclasses.dataclass(frozen=True)
class RandomDagConfig:
  """Sizes and seed of `random_dag`.

  Attributes:
    batch_size: rows per step.
    hidden: width of every node's tensor.
    num_layers: layers of the DAG.
    width: nodes per layer.
    optimizer: optimizer name (see `common.make_optimizer`).
    learning_rate: step size.
    seed: seeds the DAG's shape, the graph and the data.
  """
  batch_size: int = 32
  hidden: int = 128
  num_layers: int = 6
  width: int = 4
  optimizer: str = "sgd"
  learning_rate: float = 0.01
  seed: int = 1


def _block(kind: str, x: tf.Tensor, hidden: int) -> tf.Tensor:
  if kind == "dense_relu":
    return tf.nn.relu(common.dense(x, hidden, "dense"))
  if kind == "tanh":
    return tf.tanh(x)
  if kind == "gate":
    return x * tf.sigmoid(common.dense(x, hidden, "gate"))
  if kind == "norm":
    mean = tf.reduce_mean(x, axis=-1, keepdims=True)
    var = tf.reduce_mean(tf.math.squared_difference(x, mean), axis=-1,
                         keepdims=True)
    return (x - mean) * tf.math.rsqrt(var + 1e-6)
  return x + tf.tanh(common.dense(x, hidden, "residual"))


def _node(inputs: List[tf.Tensor], rng: np.random.Generator,
          hidden: int, scope: str) -> tf.Tensor:
  with _V1.variable_scope(scope):
    if len(inputs) == 1:
      x = inputs[0]
    elif rng.random() < 0.5:
      x = tf.add_n(inputs)
    else:
      x = common.dense(tf.concat(inputs, axis=1), hidden, "combine")
    return _block(BLOCKS[int(rng.integers(len(BLOCKS)))], x, hidden)


def _loss(config: RandomDagConfig) -> tf.Tensor:
  rng = np.random.default_rng(config.seed)
  x = tf.random.stateless_normal([config.batch_size, config.hidden],
                                 seed=[config.seed, 3], name="inputs")
  layers = [[_node([x], rng, config.hidden, f"node_0_{i}")
             for i in range(config.width)]]
  for l in range(1, config.num_layers):
    pool = [t for layer in layers[-2:] for t in layer]
    nodes = []
    for i in range(config.width):
      k = int(rng.integers(1, 4))
      picks = sorted(rng.choice(len(pool), size=min(k, len(pool)),
                                replace=False))
      nodes.append(_node([pool[p] for p in picks], rng, config.hidden,
                         f"node_{l}_{i}"))
    layers.append(nodes)
  with _V1.variable_scope("head"):
    return tf.reduce_mean(tf.square(tf.add_n(layers[-1])))


def build(config: RandomDagConfig) -> common.BuiltGraph:
  """Builds the random DAG's training step described by `config`."""
  common.check_positive(config, ["batch_size", "hidden", "num_layers",
                                 "width"])
  return common.build_graph(config, _loss, config.optimizer,
                            config.learning_rate)
