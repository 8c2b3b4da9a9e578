"""Benchmark models written with Keras (tf_keras), as a Keras user has them.

``mobilenet_v2``: `tf_keras.applications.MobileNetV2` (Sandler et al., CVPR
2018; depthwise-separable inverted residual blocks, ReLU6, batch norm), random
weights. ``keras_lstm``: token ids -> `Embedding` -> `LSTM` -> `Dense`, a text
classifier whose LSTM is one `While` loop (and its gradient loop) with tensor
lists, as Keras builds it. ``keras_transformer``: token ids -> `Embedding`
-> transformer encoder layers (`MultiHeadAttention`, whose projections and
scores are Einsum ops, layer normalization, a GELU feed-forward) -> mean
over the sequence -> `Dense`, a text classifier. All are trained by their
graph-mode optimizer on seeded random data of `batch_size` rows from
seeded weights (`importers_keras.graph_step`), so their op types are the
ones the hand-written benchmark graphs lack (DepthwiseConv2dNative, Relu6,
functional loops, Einsum, channels-first batch norms).
"""

import dataclasses

from tfplace.errors import GraphImportError
from tfplace.models import common


@dataclasses.dataclass(frozen=True)
class MobileNetV2Config:
  """Sizes of `mobilenet_v2`.

  Attributes:
    batch_size: images per step.
    image_size: height and width of the RGB images (>= 32).
    alpha: width multiplier of every layer (MobileNetV2's 0.35-1.4).
    num_classes: output classes.
    optimizer: a Keras optimizer name with a graph-mode twin ("rmsprop",
      as the paper).
    seed: seeds the data and the weights.
  """
  batch_size: int = 8
  image_size: int = 64
  alpha: float = 0.35
  num_classes: int = 10
  optimizer: str = "rmsprop"
  seed: int = 0


@dataclasses.dataclass(frozen=True)
class KerasLstmConfig:
  """Sizes of `keras_lstm`.

  Attributes:
    batch_size: sequences per step.
    seq_len: tokens per sequence (the loop's trip count).
    vocab: vocabulary size.
    embedding: embedding width.
    hidden: LSTM units.
    num_classes: output classes.
    optimizer: a Keras optimizer name with a graph-mode twin.
    seed: seeds the data and the weights.
  """
  batch_size: int = 16
  seq_len: int = 20
  vocab: int = 1000
  embedding: int = 32
  hidden: int = 64
  num_classes: int = 5
  optimizer: str = "adam"
  seed: int = 0


@dataclasses.dataclass(frozen=True)
class KerasTransformerConfig:
  """Sizes of `keras_transformer`.

  Attributes:
    batch_size: sequences per step.
    seq_len: tokens per sequence.
    vocab: vocabulary size.
    dim: model width (embedding and attention output).
    heads: attention heads, each of width dim / heads.
    feed_forward: width of the feed-forward layer.
    layers: encoder layers.
    num_classes: output classes.
    optimizer: a Keras optimizer name with a graph-mode twin.
    seed: seeds the data and the weights.
  """
  batch_size: int = 16
  seq_len: int = 32
  vocab: int = 1000
  dim: int = 64
  heads: int = 4
  feed_forward: int = 128
  layers: int = 2
  num_classes: int = 5
  optimizer: str = "adam"
  seed: int = 0


def build_mobilenet_v2(config: MobileNetV2Config) -> common.BuiltGraph:
  """MobileNetV2's training step (see the module docstring)."""
  import tf_keras
  common.check_positive(config, ["batch_size", "image_size", "alpha",
                                 "num_classes"])
  if config.image_size < 32:
    raise GraphImportError(
        f"mobilenet_v2: image_size must be >= 32, got {config.image_size}")
  base = tf_keras.applications.MobileNetV2(
      input_shape=(config.image_size, config.image_size, 3),
      alpha=config.alpha, weights=None, include_top=False)
  # Its own top, with names: Keras would number an unnamed pooling layer
  # afresh in every build ("global_average_pooling2d_1"), and the graph's
  # op names with it.
  pooled = tf_keras.layers.GlobalAveragePooling2D(name="avg_pool")(
      base.output)
  logits = tf_keras.layers.Dense(config.num_classes, name="predictions")(
      pooled)
  model = tf_keras.Model(base.input, logits, name=base.name)
  loss = tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True)
  return _built(model, loss, config)


def build_keras_lstm(config: KerasLstmConfig) -> common.BuiltGraph:
  """The LSTM text classifier's training step (see the module docstring)."""
  import tf_keras
  common.check_positive(config, ["batch_size", "seq_len", "vocab",
                                 "embedding", "hidden", "num_classes"])
  layers = tf_keras.layers
  model = tf_keras.Sequential([
      tf_keras.Input((config.seq_len,), dtype="int32", name="tokens"),
      layers.Embedding(config.vocab, config.embedding, name="embedding"),
      layers.LSTM(config.hidden, name="lstm"),
      layers.Dense(config.num_classes, name="logits")], name="keras_lstm")
  loss = tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True)
  return _built(model, loss, config)


def build_keras_transformer(config: KerasTransformerConfig
                            ) -> common.BuiltGraph:
  """The transformer text classifier's training step (see the module
  docstring); post-norm encoder layers as in Vaswani et al. (2017)."""
  import tf_keras
  common.check_positive(config, ["batch_size", "seq_len", "vocab", "dim",
                                 "heads", "feed_forward", "layers",
                                 "num_classes"])
  if config.dim % config.heads:
    raise GraphImportError(f"keras_transformer: dim ({config.dim}) must be "
                           f"a multiple of heads ({config.heads})")
  layers = tf_keras.layers
  tokens = tf_keras.Input((config.seq_len,), dtype="int32", name="tokens")
  x = layers.Embedding(config.vocab, config.dim, name="embedding")(tokens)
  for i in range(config.layers):
    attended = layers.MultiHeadAttention(
        config.heads, config.dim // config.heads, name=f"attention_{i}")(x, x)
    # Named Add layers: `x + y` would make a layer Keras numbers afresh in
    # every build, and the graph's op names with it.
    x = layers.LayerNormalization(name=f"norm_{i}_a")(
        layers.Add(name=f"residual_{i}_a")([x, attended]))
    hidden = layers.Dense(config.feed_forward, activation="gelu",
                          name=f"feed_forward_{i}")(x)
    projected = layers.Dense(config.dim, name=f"project_{i}")(hidden)
    x = layers.LayerNormalization(name=f"norm_{i}_b")(
        layers.Add(name=f"residual_{i}_b")([x, projected]))
  pooled = layers.GlobalAveragePooling1D(name="pool")(x)
  logits = layers.Dense(config.num_classes, name="logits")(pooled)
  model = tf_keras.Model(tokens, logits, name="keras_transformer")
  loss = tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True)
  return _built(model, loss, config)


def _seed_weights(model, seed: int) -> None:
  """Sets the model's weights from `seed` (Keras drew them from its global
  generator): scales and variances 1, shifts, biases and means 0, other
  weights Glorot-uniform over their fan-in and fan-out."""
  import numpy as np
  rng = np.random.RandomState(seed)
  values = []
  for w in model.weights:
    shape = tuple(w.shape)
    leaf = w.name.split("/")[-1].split(":")[0]
    if leaf in ("gamma", "moving_variance"):
      values.append(np.ones(shape, np.float32))
    elif leaf in ("beta", "moving_mean", "bias") or len(shape) < 2:
      values.append(np.zeros(shape, np.float32))
    else:
      fan_in, fan_out = int(np.prod(shape[:-1])), int(shape[-1])
      limit = np.sqrt(6.0 / (fan_in + fan_out))
      values.append(rng.uniform(-limit, limit, shape).astype(np.float32))
  model.set_weights(values)


def _built(model, loss, config) -> common.BuiltGraph:
  """The model's graph-mode step as a `BuiltGraph`."""
  import tensorflow as tf
  from tfplace.graph import importers_keras
  _seed_weights(model, config.seed)
  step = importers_keras.graph_step(model, loss, config.optimizer,
                                    batch_size=config.batch_size,
                                    seed=config.seed)
  graph = tf.Graph()
  with graph.as_default():
    tf.compat.v1.import_graph_def(step.graph_def, name="")
  return common.BuiltGraph(graph, step.train_ops[0], step.loss,
                           step.init_ops[0], config)
