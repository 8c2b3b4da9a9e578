"""A small Transformer encoder classifier (Vaswani et al., NeurIPS 2017).

Token and position embeddings, `num_layers` post-norm encoder layers
(multi-head self-attention with batched matmuls and softmax, residual, layer
norm, a ReLU feed-forward block, residual, layer norm), mean pooling over
the sequence, a dense layer and softmax cross-entropy. Layer norm is written
out in primitive ops (mean, squared difference, rsqrt), as Keras lowers it.

Name scopes: ``embedding/``, ``layer_<k>/attention/``, ``layer_<k>/ffn/``,
``layer_<k>/norm_<i>/``, ``head/``.
"""

import dataclasses
import functools

import tensorflow as tf

from tfplace.errors import GraphImportError
from tfplace.models import common

_V1 = tf.compat.v1

# x [..., in] @ weights + bias over the last axis (MatMul, BiasAdd), in the
# variable scope given.
_dense = functools.partial(common.dense, bias_add=True, flatten=True)


@dataclasses.dataclass(frozen=True)
class TransformerConfig:
  """Sizes of `transformer`.

  Attributes:
    batch_size: sequences per step.
    seq_len: tokens per sequence.
    vocab: vocabulary size.
    d_model: model width (a multiple of `num_heads`).
    num_heads: attention heads.
    d_ff: hidden units of the feed-forward block.
    num_layers: encoder layers.
    num_classes: output classes.
    optimizer: optimizer name (see `common.make_optimizer`).
    learning_rate: step size.
    seed: seeds the graph and the data.
  """
  batch_size: int = 8
  seq_len: int = 32
  vocab: int = 1000
  d_model: int = 64
  num_heads: int = 4
  d_ff: int = 128
  num_layers: int = 2
  num_classes: int = 10
  optimizer: str = "adam"
  learning_rate: float = 0.001
  seed: int = 1


def layer_norm(x: tf.Tensor, scope: str) -> tf.Tensor:
  """Layer norm over the last axis in primitive ops."""
  with _V1.variable_scope(scope):
    gamma = common.variable("gamma", [x.shape[-1]], constant=1.0)
    beta = common.variable("beta", [x.shape[-1]], constant=0.0)
    mean = tf.reduce_mean(x, axis=-1, keepdims=True)
    var = tf.reduce_mean(tf.math.squared_difference(x, mean), axis=-1,
                         keepdims=True)
    return (x - mean) * tf.math.rsqrt(var + 1e-6) * gamma + beta


def _heads(x: tf.Tensor, config: TransformerConfig) -> tf.Tensor:
  """[B, T, D] -> [B, H, T, D/H]."""
  depth = config.d_model // config.num_heads
  x = tf.reshape(x, [config.batch_size, config.seq_len, config.num_heads,
                     depth])
  return tf.transpose(x, [0, 2, 1, 3])


def _attention(x: tf.Tensor, config: TransformerConfig) -> tf.Tensor:
  with _V1.variable_scope("attention"):
    q = _heads(_dense(x, config.d_model, "query"), config)
    k = _heads(_dense(x, config.d_model, "key"), config)
    v = _heads(_dense(x, config.d_model, "value"), config)
    depth = config.d_model // config.num_heads
    scores = tf.matmul(q, k, transpose_b=True) * (depth ** -0.5)
    context = tf.matmul(tf.nn.softmax(scores), v)
    context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]),
                         [config.batch_size, config.seq_len, config.d_model])
    return _dense(context, config.d_model, "output")


def _encoder_layer(x: tf.Tensor, config: TransformerConfig,
                   scope: str) -> tf.Tensor:
  with _V1.variable_scope(scope):
    x = layer_norm(x + _attention(x, config), "norm_0")
    with _V1.variable_scope("ffn"):
      h = tf.nn.relu(_dense(x, config.d_ff, "inner"))
      h = _dense(h, config.d_model, "outer")
    return layer_norm(x + h, "norm_1")


def _loss(config: TransformerConfig) -> tf.Tensor:
  tokens = common.synthetic_tokens([config.batch_size, config.seq_len],
                                   config.vocab, config.seed, name="tokens")
  labels = common.synthetic_tokens([config.batch_size], config.num_classes,
                                   config.seed + 1, name="labels")
  with _V1.variable_scope("embedding"):
    table = common.variable("table", [config.vocab, config.d_model],
                            stddev=0.05)
    position = common.variable("position", [config.seq_len, config.d_model],
                               stddev=0.05)
    x = tf.nn.embedding_lookup(table, tokens) + position
  for k in range(config.num_layers):
    x = _encoder_layer(x, config, f"layer_{k}")
  with _V1.variable_scope("head"):
    pooled = tf.reduce_mean(x, axis=1)
    w = common.variable("weights", [config.d_model, config.num_classes])
    b = common.variable("bias", [config.num_classes], constant=0.0)
    return common.mean_xent(tf.matmul(pooled, w) + b, labels)


def build(config: TransformerConfig) -> common.BuiltGraph:
  """Builds the Transformer encoder training step described by `config`."""
  common.check_positive(config, ["batch_size", "seq_len", "vocab", "d_model",
                                 "num_heads", "d_ff", "num_layers",
                                 "num_classes"])
  if config.d_model % config.num_heads:
    raise GraphImportError(f"TransformerConfig.d_model ({config.d_model}) "
                           f"must be a multiple of num_heads "
                           f"({config.num_heads})")
  return common.build_graph(config, _loss, config.optimizer,
                            config.learning_rate)
