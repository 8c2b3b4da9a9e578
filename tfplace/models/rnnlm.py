"""RNNLM: a 2-layer unrolled LSTM language model (Zaremba et al. 2014).

The RNNLM benchmark of Mirhoseini et al. (ICML 2017). Token ids are made in
the graph (seeded); the model embeds them, runs `num_layers` LSTM layers
unrolled over `num_steps` steps, projects every step's output to the
vocabulary and takes the mean softmax cross-entropy against the next token.

Name scopes (the expert placer relies on them):
  * ``embedding/``            the embedding table and lookup;
  * ``lstm_<k>/``             layer k (``lstm_<k>/t_<t>/`` for step t);
  * ``softmax/``              the output projection and cross-entropy;
  * ``loss``                  the scalar loss (tensor ``loss:0``);
  * ``gradients/<scope>/...`` the backward ops of each scope;
  * ``train_op``, ``init``    the update and the initializer.
"""

import dataclasses

import tensorflow as tf

from tfplace.models import common
from tfplace.models import lstm_cell

_V1 = tf.compat.v1


@dataclasses.dataclass(frozen=True)
class RnnlmConfig:
  """RNNLM sizes; the defaults are the benchmark's (about 5.3K ops).

  Attributes:
    batch_size: sequences per step.
    num_steps: unrolled time steps.
    hidden: LSTM units (also the embedding size).
    num_layers: stacked LSTM layers.
    vocab: vocabulary size.
    keep_prob: dropout keep probability between layers (1.0: no dropout).
    optimizer: "sgd", "adam", "momentum" or "rmsprop".
    learning_rate: the optimizer's step size.
    init_scale: uniform init range of the weights.
    seed: seeds the graph and the synthetic data.
    placeholder_inputs: take the token ids from an int32 placeholder
      ``tokens`` [batch_size, num_steps + 1] instead of in-graph random ops.
  """
  batch_size: int = 64
  num_steps: int = 35
  hidden: int = 1024
  num_layers: int = 2
  vocab: int = 10000
  keep_prob: float = 1.0
  optimizer: str = "sgd"
  learning_rate: float = 1.0
  init_scale: float = 0.05
  seed: int = 1
  placeholder_inputs: bool = False


def _dropout(xs, keep_prob: float):
  if keep_prob >= 1.0:
    return xs
  return [tf.nn.dropout(x, rate=1.0 - keep_prob) for x in xs]


def _loss(config: RnnlmConfig) -> tf.Tensor:
  tokens = common.synthetic_tokens(
      [config.batch_size, config.num_steps + 1], config.vocab, config.seed,
      name="tokens", placeholder=config.placeholder_inputs)
  with _V1.variable_scope("embedding"):
    table = common.variable("table", [config.vocab, config.hidden],
                            stddev=config.init_scale)
    embedded = tf.nn.embedding_lookup(table, tokens[:, :-1])
    inputs = tf.unstack(embedded, axis=1)
  for layer in range(config.num_layers):
    inputs = lstm_cell.unrolled_layer(
        f"lstm_{layer}", _dropout(inputs, config.keep_prob), config.hidden,
        config.init_scale)
  with _V1.variable_scope("softmax"):
    weights = common.variable("weights", [config.hidden, config.vocab],
                              stddev=config.init_scale)
    bias = common.variable("bias", [config.vocab], constant=0.0)
    outputs = tf.concat(_dropout(inputs, config.keep_prob), axis=0)
    logits = tf.matmul(outputs, weights) + bias
    labels = tf.reshape(tf.transpose(tokens[:, 1:]), [-1])
    return common.mean_xent(logits, labels)


def build(config: RnnlmConfig) -> common.BuiltGraph:
  """Builds the RNNLM training step described by `config`."""
  common.check_positive(config, ["batch_size", "num_steps", "hidden",
                                 "num_layers", "vocab", "keep_prob"])
  return common.build_graph(config, _loss, config.optimizer,
                            config.learning_rate)
