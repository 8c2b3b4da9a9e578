"""NMT: a GNMT-like attentional LSTM translation model, unrolled.

The NMT benchmark of Mirhoseini et al. (ICML 2017), shaped after GNMT (Wu et
al. 2016): an embedding per language, an encoder whose first layer is
bidirectional followed by unidirectional layers (`num_layers` in all,
residual connections from the third layer on), a decoder of `num_layers`
LSTM layers with Luong attention and input feeding (Luong et al. 2015), and
a softmax over the target vocabulary. Both sides are unrolled by a Python
loop, so every step's ops can be placed.

Name scopes (the expert placer relies on them):
  * ``encoder/embedding/``, ``decoder/embedding/``  embedding tables, lookups;
  * ``encoder/layer_0/fw/``, ``encoder/layer_0/bw/`` the bidirectional layer;
  * ``encoder/layer_<k>/``, ``decoder/layer_<k>/``  LSTM layers
    (``.../t_<t>/`` for step t);
  * ``attention/``  the memory projection (``attention/memory/``) and each
    decoder step's attention (``attention/t_<t>/``);
  * ``softmax/``  output projection and cross-entropy; ``loss`` the loss;
  * ``gradients/<scope>/...`` backward ops; ``train_op``, ``init``.
"""

import dataclasses
from typing import List

import tensorflow as tf

from tfplace.models import common
from tfplace.models import lstm_cell

_V1 = tf.compat.v1


@dataclasses.dataclass(frozen=True)
class NmtConfig:
  """NMT sizes; the defaults are the benchmark's (about 22.5K ops).

  Attributes:
    batch_size: sentence pairs per step.
    src_len: unrolled encoder steps.
    tgt_len: unrolled decoder steps.
    hidden: LSTM units (also the embedding and attention size).
    num_layers: encoder layers (the first bidirectional) and decoder layers.
    src_vocab: source vocabulary size.
    tgt_vocab: target vocabulary size.
    optimizer: "sgd", "adam", "momentum" or "rmsprop".
    learning_rate: the optimizer's step size.
    init_scale: uniform init range of the weights.
    seed: seeds the graph and the synthetic data.
  """
  batch_size: int = 64
  src_len: int = 28
  tgt_len: int = 28
  hidden: int = 1024
  num_layers: int = 4
  src_vocab: int = 32000
  tgt_vocab: int = 32000
  optimizer: str = "sgd"
  learning_rate: float = 1.0
  init_scale: float = 0.1
  seed: int = 1


def _embed(scope: str, tokens: tf.Tensor, vocab: int, dim: int,
           init_scale: float) -> List[tf.Tensor]:
  with _V1.variable_scope(scope):
    table = common.variable("table", [vocab, dim], stddev=init_scale)
    return tf.unstack(tf.nn.embedding_lookup(table, tokens), axis=1)


def _encoder(config: NmtConfig, src: tf.Tensor) -> List[tf.Tensor]:
  """Returns the top encoder layer's output per source step."""
  h, scale = config.hidden, config.init_scale
  with _V1.variable_scope("encoder"):
    inputs = _embed("embedding", src, config.src_vocab, h, scale)
    with _V1.variable_scope("layer_0"):
      fw = lstm_cell.unrolled_layer("fw", inputs, h, scale)
      bw = lstm_cell.unrolled_layer("bw", inputs, h, scale, reverse=True)
      with tf.name_scope("concat"):
        inputs = [tf.concat([f, b], axis=1) for f, b in zip(fw, bw)]
    for layer in range(1, config.num_layers):
      inputs = lstm_cell.unrolled_layer(
          f"layer_{layer}", inputs, h, scale, residual=layer >= 2)
  return inputs


@dataclasses.dataclass(frozen=True)
class _Attention:
  """Luong 'general' attention over the encoder outputs."""
  memory: tf.Tensor   # [batch, src_len, hidden]
  keys: tf.Tensor     # memory @ W_a, [batch, src_len, hidden]
  w_out: tf.Tensor    # [2 * hidden, hidden]

  def step(self, query: tf.Tensor) -> tf.Tensor:
    """Returns the attentional hidden state for one decoder output."""
    scores = tf.squeeze(tf.matmul(self.keys, query[:, :, None]), axis=2)
    weights = tf.nn.softmax(scores)
    context = tf.reduce_sum(self.memory * weights[:, :, None], axis=1)
    return tf.tanh(tf.matmul(tf.concat([context, query], 1), self.w_out))


def _attention(config: NmtConfig, enc_outputs: List[tf.Tensor]) -> _Attention:
  h = config.hidden
  with _V1.variable_scope("attention"), tf.name_scope("memory"):
    w_mem = common.variable("memory_kernel", [h, h], stddev=config.init_scale)
    w_out = common.variable("output_kernel", [2 * h, h],
                            stddev=config.init_scale)
    memory = tf.stack(enc_outputs, axis=1)
    keys = tf.reshape(tf.matmul(tf.reshape(memory, [-1, h]), w_mem),
                      [config.batch_size, len(enc_outputs), h])
    return _Attention(memory=memory, keys=keys, w_out=w_out.read_value())


def _decoder(config: NmtConfig, tgt_in: tf.Tensor,
             attention: _Attention) -> List[tf.Tensor]:
  """Returns the attentional output per target step (input feeding)."""
  h, scale, batch = config.hidden, config.init_scale, config.batch_size
  with _V1.variable_scope("decoder"):
    embedded = _embed("embedding", tgt_in, config.tgt_vocab, h, scale)
    params, states = [], []
    for layer in range(config.num_layers):
      with _V1.variable_scope(f"layer_{layer}"):
        in_size = 2 * h if layer == 0 else h
        params.append(lstm_cell.lstm_params(in_size, h, scale))
        states.append(lstm_cell.zero_state(batch, h))
  feed = tf.zeros([batch, h], name="decoder/attention_feed")
  outputs = []
  for t, emb in enumerate(embedded):
    x = tf.concat([emb, feed], axis=1, name=f"decoder/layer_0/t_{t}/feed")
    for layer, p in enumerate(params):
      with tf.name_scope(f"decoder/layer_{layer}/t_{t}/"):
        new_h, new_c = lstm_cell.lstm_step(p, x, *states[layer])
        states[layer] = (new_h, new_c)
        x = (tf.add(new_h, x, name="residual") if layer >= 2
             else new_h)
    with tf.name_scope(f"attention/t_{t}/"):
      feed = attention.step(x)
    outputs.append(feed)
  return outputs


def _loss(config: NmtConfig) -> tf.Tensor:
  src = common.synthetic_tokens([config.batch_size, config.src_len],
                                config.src_vocab, config.seed, name="source")
  tgt = common.synthetic_tokens([config.batch_size, config.tgt_len + 1],
                                config.tgt_vocab, config.seed + 1,
                                name="target")
  attention = _attention(config, _encoder(config, src))
  outputs = _decoder(config, tgt[:, :-1], attention)
  with _V1.variable_scope("softmax"):
    weights = common.variable("weights", [config.hidden, config.tgt_vocab],
                              stddev=config.init_scale)
    logits = tf.matmul(tf.concat(outputs, axis=0), weights)
    labels = tf.reshape(tf.transpose(tgt[:, 1:]), [-1])
    return common.mean_xent(logits, labels)


def build(config: NmtConfig) -> common.BuiltGraph:
  """Builds the NMT training step described by `config`."""
  common.check_positive(config, ["batch_size", "src_len", "tgt_len", "hidden",
                                 "num_layers", "src_vocab", "tgt_vocab"])
  return common.build_graph(config, _loss, config.optimizer,
                            config.learning_rate)
