"""The calibration suite: small training graphs of different shapes.

`tfplace calibrate` measures these on a cluster and fits per-op-type costs
from their op records, so that one calibration describes the cluster, not
one graph. Seven kinds, each at several sizes (`SUITES`):

* ``calib_conv``: 3x3 and 1x1 convolutions at stride 1 and 2 (the 1x1
  stride-2 one a projection shortcut, in the default suite), fused batch
  norm, ReLU, max and average pooling, residual adds, global mean pooling,
  a dense layer, softmax cross-entropy (momentum).
* ``calib_depthwise``: six depthwise convolutions (3x3 or 5x5, every other
  one at stride 2) with batch norm, ReLU6 and residual adds, as in
  MobileNet's and EfficientNet's blocks, momentum. TF's CPU depthwise
  kernels run at 5-17 % of the dense convolutions' FLOP/s and below the
  copy bandwidth (measured in MobileNetV2's traced steps,
  WORKSPACE_NOTES.md), so neither roofline predicts them: they need
  executions of their own. The graph has no dense convolution: the 1x1
  convolutions of MobileNet's blocks, added to the suite, moved the fitted
  Conv2DBackpropFilter curve 2x at ResNet's shapes.
* ``calib_attention``: self-attention blocks as Keras's layers run them:
  `tf.einsum` in the equations of `MultiHeadAttention` (projections to
  and from heads, scores, context), softmax, a residual add, and layer
  normalization as `LayerNormalization` computes it, a fused batch norm
  over NCHW data with one channel per row (Adam). Einsums (11 equations
  in one block's training step) and channels-first batch norms are what
  the other graphs never run; both have costs of their own
  (`Op.variant`: an einsum with batch indices, an NCHW batch norm).
* ``calib_matmul``: dense layers of changing widths with ReLU, tanh and
  sigmoid, batched matmuls and a softmax over a [batch, groups, groups]
  score tensor, softmax cross-entropy (Adam).
* ``calib_embedding``: two embedding tables (gathers, sparse gradients),
  mean pooling over the sequence, a concatenation, a dense layer, softmax
  cross-entropy (SGD). The default suite also runs it with Adam, whose
  sparse update (Unique, UnsortedSegmentSum, a scatter into each slot)
  every Keras model that trains an embedding with Adam runs.
* ``calib_elementwise``: a chain of element-wise and data-movement ops
  (unary math, binary ops, layer norm, transpose, concat/split, pad/slice,
  tile, cast) on tensors from 16 KB to a few MB, scaled by a trainable
  vector (SGD); in the default suite each pass ends with an exact GELU
  (Erfc), the activation of Keras's transformer feed-forward layers.
* ``calib_loop``: a GRU over a sequence in a `tf.while_loop` (reading its
  inputs from and writing its states to TensorArrays), whose gradient is a
  second While: the frame ops a session lowers each While to (Enter,
  Merge, Switch, NextIteration, Exit, LoopCond), the TensorList ops of the
  arrays and of the gradient's accumulators (push in the forward loop, pop
  in the gradient loop), and small matmuls and gates run once per step
  (Adam). The other graphs run no loop; a traced step records a loop's
  nodes under their lowered names (`tfplace.graph.lowered_loops`).

The losses' softmax cross-entropy runs over 10 to 2,000 classes: its time
per element is ~12x its roofline (exp and log), which 10 classes, 0.03 us
of roofline work, cannot show (WORKSPACE_NOTES.md, issue 13).

The suite is for calibration only: the graphs a calibration is judged on
(`scripts/fidelity.py --cross`) are other models.
"""

import dataclasses
import functools
from typing import Dict, List, Tuple

import tensorflow as tf

from tfplace.errors import GraphImportError
from tfplace.models import common

_V1 = tf.compat.v1

# x @ weights + bias with a BiasAdd op, in the variable scope given.
_dense = functools.partial(common.dense, bias_add=True)


@dataclasses.dataclass(frozen=True)
class CalibConvConfig:
  """Sizes of `calib_conv`.

  Attributes:
    batch_size: images per step.
    image_size: height and width of the input.
    channels: channels of the convolutions.
    num_classes: output classes.
    seed: seeds the graph and the data.
    projection: add a 1x1 stride-2 projection shortcut around the stride-2
      convolution (as ResNet's downsampling blocks have).
  """
  batch_size: int = 4
  image_size: int = 16
  channels: int = 16
  num_classes: int = 10
  seed: int = 1
  projection: bool = False


@dataclasses.dataclass(frozen=True)
class CalibDepthwiseConfig:
  """Sizes of `calib_depthwise`.

  Attributes:
    batch_size: images per step.
    image_size: height and width of the input feature map.
    channels: its channels, kept by every block (MobileNet's depth
      multiplier 1).
    kernel_size: height and width of the depthwise kernels.
    num_classes: output classes.
    seed: seeds the graph and the data.
  """
  batch_size: int = 8
  image_size: int = 16
  channels: int = 16
  kernel_size: int = 3
  num_classes: int = 10
  seed: int = 1


@dataclasses.dataclass(frozen=True)
class CalibAttentionConfig:
  """Sizes of `calib_attention`.

  Attributes:
    batch_size: sequences per step.
    seq_len: positions per sequence.
    heads: attention heads.
    key_dim: width of each head; the model width is heads x key_dim.
    blocks: self-attention blocks in a row.
    num_classes: output classes.
    seed: seeds the graph and the data.
  """
  batch_size: int = 8
  seq_len: int = 16
  heads: int = 2
  key_dim: int = 16
  blocks: int = 2
  num_classes: int = 10
  seed: int = 1


@dataclasses.dataclass(frozen=True)
class CalibMatmulConfig:
  """Sizes of `calib_matmul`.

  Attributes:
    batch_size: rows per step.
    widths: widths of the dense layers in order.
    groups: groups of the batched-matmul block (divides the last width).
    num_classes: output classes.
    seed: seeds the graph and the data.
  """
  batch_size: int = 16
  widths: Tuple[int, ...] = (64, 128, 32)
  groups: int = 4
  num_classes: int = 10
  seed: int = 1


@dataclasses.dataclass(frozen=True)
class CalibEmbeddingConfig:
  """Sizes of `calib_embedding`.

  Attributes:
    batch_size: sequences per step.
    seq_len: tokens per sequence.
    vocab: rows of each embedding table.
    dim: embedding width.
    num_classes: output classes.
    seed: seeds the graph and the data.
    optimizer: "sgd" (the sparse gradients scattered into the tables) or
      "adam" (summed per distinct row first: Unique, UnsortedSegmentSum,
      then scattered into both slots, as Keras's and TF's Adam update an
      embedding).
  """
  batch_size: int = 16
  seq_len: int = 8
  vocab: int = 1000
  dim: int = 32
  num_classes: int = 10
  seed: int = 1
  optimizer: str = "sgd"


@dataclasses.dataclass(frozen=True)
class CalibElementwiseConfig:
  """Sizes of `calib_elementwise`.

  Attributes:
    batch_size: rows of the tensors.
    width: columns of the tensors (a multiple of 4).
    repeats: times the chain of ops is repeated.
    seed: seeds the graph and the data.
    gelu: end each pass with an exact GELU (`tf.nn.gelu`: Erfc, as Keras's
      "gelu" activation in transformer feed-forward layers).
  """
  batch_size: int = 16
  width: int = 256
  repeats: int = 1
  seed: int = 1
  gelu: bool = False


@dataclasses.dataclass(frozen=True)
class CalibLoopConfig:
  """Sizes of `calib_loop`.

  Attributes:
    batch_size: sequences per step.
    seq_len: steps of the loop (its trip count).
    input_dim: width of each step's input.
    hidden: width of the GRU's state.
    num_classes: output classes.
    seed: seeds the graph and the data.
  """
  batch_size: int = 16
  seq_len: int = 10
  input_dim: int = 32
  hidden: int = 64
  num_classes: int = 10
  seed: int = 1


def _batch_norm(y: tf.Tensor) -> tf.Tensor:
  channels = y.shape[-1]
  scale = common.variable("bn_scale", [channels], constant=1.0)
  offset = common.variable("bn_offset", [channels], constant=0.0)
  return _V1.nn.fused_batch_norm(y, scale, offset, is_training=True)[0]


def _conv(x: tf.Tensor, channels: int, kernel: int, stride: int,
          scope: str) -> tf.Tensor:
  with _V1.variable_scope(scope):
    w = common.variable("weights", [kernel, kernel, x.shape[-1], channels])
    y = tf.nn.conv2d(x, w, strides=stride, padding="SAME")
    return tf.nn.relu(_batch_norm(y))


def _conv_loss(config: CalibConvConfig) -> tf.Tensor:
  size, c = config.image_size, config.channels
  x = tf.random.stateless_normal([config.batch_size, size, size, 3],
                                 seed=[config.seed, 7], name="images")
  labels = common.synthetic_tokens([config.batch_size], config.num_classes,
                                   config.seed, name="labels")
  x = _conv(x, c, 3, 1, "conv_0")
  y = _conv(_conv(x, c, 3, 1, "conv_1"), c, 1, 1, "conv_2")
  x = tf.nn.max_pool2d(x + y, 2, 2, "SAME")
  down = _conv(x, 2 * c, 3, 2, "conv_3")
  if config.projection:
    down += _conv(x, 2 * c, 1, 2, "project")
  x = down
  x = tf.nn.avg_pool2d(_conv(x, 2 * c, 1, 1, "conv_4"), 2, 2, "SAME")
  logits = _dense(tf.reduce_mean(x, axis=[1, 2]), config.num_classes, "dense")
  return common.mean_xent(logits, labels)


# Strides of calib_depthwise's blocks.
_DEPTHWISE_STRIDES = (1, 2, 1, 2, 1, 2)


def _depthwise_block(x: tf.Tensor, stride: int, kernel: int,
                     scope: str) -> tf.Tensor:
  """Depthwise k x k at `stride`, batch norm, ReLU6; the input added back
  at stride 1."""
  with _V1.variable_scope(scope):
    w = common.variable("weights", [kernel, kernel, x.shape[-1], 1])
    y = tf.nn.depthwise_conv2d(x, w, [1, stride, stride, 1], "SAME")
    y = tf.nn.relu6(_batch_norm(y))
    return x + y if stride == 1 else y


def _depthwise_loss(config: CalibDepthwiseConfig) -> tf.Tensor:
  size = config.image_size
  x = tf.random.stateless_normal(
      [config.batch_size, size, size, config.channels], seed=[config.seed, 9],
      name="features")
  labels = common.synthetic_tokens([config.batch_size], config.num_classes,
                                   config.seed, name="labels")
  for i, stride in enumerate(_DEPTHWISE_STRIDES):
    x = _depthwise_block(x, stride, config.kernel_size, f"block_{i}")
  logits = _dense(tf.reduce_mean(x, axis=[1, 2]), config.num_classes, "dense")
  return common.mean_xent(logits, labels)


def _einsum_projection(x: tf.Tensor, equation: str, shape: List[int],
                       bias_shape: List[int], name: str) -> tf.Tensor:
  """x contracted with a weight of `shape` by `equation`, plus a bias (as
  Keras's EinsumDense)."""
  w = common.variable(f"{name}_weights", shape)
  b = common.variable(f"{name}_bias", bias_shape, constant=0.0)
  return tf.einsum(equation, x, w) + b


def _layer_norm(x: tf.Tensor) -> tf.Tensor:
  """Layer normalization over the last axis as Keras's LayerNormalization
  computes it: the rows as the channels of an NCHW fused batch norm, then
  a learned scale and shift."""
  shape = x.shape
  rows = shape[:-1].num_elements()
  normed = _V1.nn.fused_batch_norm(
      tf.reshape(x, [1, rows, shape[-1], 1]), tf.ones([rows]),
      tf.zeros([rows]), epsilon=1e-3, data_format="NCHW",
      is_training=True)[0]
  gamma = common.variable("norm_scale", [shape[-1]], constant=1.0)
  beta = common.variable("norm_offset", [shape[-1]], constant=0.0)
  return tf.reshape(normed, shape) * gamma + beta


def _attention_block(x: tf.Tensor, heads: int, key_dim: int,
                     scope: str) -> tf.Tensor:
  """Self-attention as Keras's MultiHeadAttention computes it, the input
  added back and the sum layer-normalized: [batch, positions, width] ->
  the same."""
  width = x.shape[-1]
  with _V1.variable_scope(scope):
    q, k, v = (_einsum_projection(x, "abc,cde->abde", [width, heads, key_dim],
                                  [heads, key_dim], name)
               for name in ("query", "key", "value"))
    q *= key_dim ** -0.5
    scores = tf.nn.softmax(tf.einsum("aecd,abcd->acbe", k, q))
    context = tf.einsum("acbe,aecd->abcd", scores, v)
    return _layer_norm(x + _einsum_projection(
        context, "abcd,cde->abe", [heads, key_dim, width], [width],
        "output"))


def _attention_loss(config: CalibAttentionConfig) -> tf.Tensor:
  x = tf.random.stateless_normal(
      [config.batch_size, config.seq_len, config.heads * config.key_dim],
      seed=[config.seed, 11], name="sequences")
  labels = common.synthetic_tokens([config.batch_size], config.num_classes,
                                   config.seed, name="labels")
  for i in range(config.blocks):
    x = _attention_block(x, config.heads, config.key_dim, f"attention_{i}")
  logits = _dense(tf.reduce_mean(x, axis=1), config.num_classes, "dense")
  return common.mean_xent(logits, labels)


def _matmul_loss(config: CalibMatmulConfig) -> tf.Tensor:
  x = tf.random.stateless_normal([config.batch_size, config.widths[0]],
                                 seed=[config.seed, 5], name="inputs")
  labels = common.synthetic_tokens([config.batch_size], config.num_classes,
                                   config.seed, name="labels")
  activations = (tf.nn.relu, tf.tanh, tf.sigmoid)
  for i, width in enumerate(config.widths):
    x = activations[i % 3](_dense(x, width, f"dense_{i}"))
  g = config.groups
  grouped = tf.reshape(x, [config.batch_size, g, config.widths[-1] // g])
  scores = tf.nn.softmax(tf.matmul(grouped, grouped, transpose_b=True))
  mixed = tf.reshape(tf.matmul(scores, grouped),
                     [config.batch_size, config.widths[-1]])
  return common.mean_xent(_dense(mixed, config.num_classes, "logits"), labels)


def _embedding_loss(config: CalibEmbeddingConfig) -> tf.Tensor:
  shape = [config.batch_size, config.seq_len]
  pooled = []
  for k in range(2):
    ids = common.synthetic_tokens(shape, config.vocab, config.seed + k,
                                  name=f"ids_{k}")
    with _V1.variable_scope(f"embedding_{k}"):
      table = common.variable("table", [config.vocab, config.dim],
                              stddev=0.05)
      pooled.append(tf.reduce_mean(tf.nn.embedding_lookup(table, ids),
                                   axis=1))
  labels = common.synthetic_tokens([config.batch_size], config.num_classes,
                                   config.seed, name="labels")
  hidden = tf.tanh(_dense(tf.concat(pooled, axis=1), config.dim, "dense"))
  return common.mean_xent(_dense(hidden, config.num_classes, "logits"),
                          labels)


def _loop_loss(config: CalibLoopConfig) -> tf.Tensor:
  b, t, h = config.batch_size, config.seq_len, config.hidden
  inputs = tf.random.stateless_normal([t, b, config.input_dim],
                                      seed=[config.seed, 6], name="inputs")
  labels = common.synthetic_tokens([b], config.num_classes, config.seed,
                                   name="labels")
  with _V1.variable_scope("gru"):
    gates_w = common.variable("gates_kernel", [config.input_dim + h, 2 * h],
                              stddev=0.1)
    gates_b = common.variable("gates_bias", [2 * h], constant=0.0)
    cand_w = common.variable("candidate_kernel", [config.input_dim + h, h],
                             stddev=0.1)
    cand_b = common.variable("candidate_bias", [h], constant=0.0)
  steps = tf.TensorArray(tf.float32, size=t).unstack(inputs)
  states = tf.TensorArray(tf.float32, size=t)

  def cell(i, state, out):
    x = steps.read(i)
    gates = tf.sigmoid(tf.nn.bias_add(
        tf.matmul(tf.concat([x, state], axis=1), gates_w), gates_b))
    update, reset = tf.split(gates, 2, axis=1)
    candidate = tf.tanh(tf.nn.bias_add(
        tf.matmul(tf.concat([x, reset * state], axis=1), cand_w), cand_b))
    state = update * state + (1.0 - update) * candidate
    return i + 1, state, out.write(i, state)

  _, last, states = tf.while_loop(
      lambda i, *_: i < t, cell, [tf.constant(0), tf.zeros([b, h]), states],
      maximum_iterations=t)
  pooled = tf.reduce_mean(states.stack(), axis=0) + last
  return common.mean_xent(_dense(pooled, config.num_classes, "logits"),
                          labels)


def _elementwise_chain(x: tf.Tensor, y: tf.Tensor,
                       gelu: bool = False) -> tf.Tensor:
  """One pass of the chain: every op keeps x's shape [B, W]."""
  x = tf.tanh(x) + tf.sigmoid(y)
  x = tf.exp(-tf.square(x)) * y - tf.math.log1p(tf.abs(x))
  x = tf.maximum(x, 0.1 * y) / (1.0 + tf.sqrt(tf.abs(y)))
  mean = tf.reduce_mean(x, axis=-1, keepdims=True)
  var = tf.reduce_mean(tf.math.squared_difference(x, mean), axis=-1,
                       keepdims=True)
  x = (x - mean) * tf.math.rsqrt(var + 1e-6)
  b, w = x.shape[0], x.shape[1]
  x = tf.reshape(tf.transpose(tf.reshape(x, [b, 4, w // 4]), [0, 2, 1]),
                 [b, w])
  left, right = tf.split(x, 2, axis=1)
  x = tf.concat([right, left * 0.5], axis=1)
  x = tf.slice(tf.pad(x, [[0, 0], [1, 1]]), [0, 1], [b, w])
  x = x + tf.tile(tf.reduce_sum(x, axis=0, keepdims=True), [b, 1]) * 1e-3
  x = tf.cast(tf.cast(x, tf.float16), tf.float32) + tf.nn.softmax(y)
  return tf.nn.gelu(x, approximate=False) if gelu else x


def _elementwise_loss(config: CalibElementwiseConfig) -> tf.Tensor:
  shape = [config.batch_size, config.width]
  x = tf.random.stateless_normal(shape, seed=[config.seed, 3], name="x")
  y = tf.random.stateless_normal(shape, seed=[config.seed, 4], name="y")
  scale = common.variable("scale", [config.width], constant=1.0)
  x = x * scale
  for _ in range(config.repeats):
    x = _elementwise_chain(x, y, config.gelu)
  return tf.reduce_mean(tf.square(x))


def build_conv(config: CalibConvConfig) -> common.BuiltGraph:
  """Convolutions, batch norm, pooling and a residual add."""
  common.check_positive(config, ["batch_size", "image_size", "channels",
                                 "num_classes"])
  return common.build_graph(config, _conv_loss, "momentum", 0.01)


def build_depthwise(config: CalibDepthwiseConfig) -> common.BuiltGraph:
  """A chain of depthwise convolution blocks."""
  common.check_positive(config, ["batch_size", "image_size", "channels",
                                 "kernel_size", "num_classes"])
  return common.build_graph(config, _depthwise_loss, "momentum", 0.01)


def build_attention(config: CalibAttentionConfig) -> common.BuiltGraph:
  """Self-attention blocks of Einsum ops and layer normalization."""
  common.check_positive(config, ["batch_size", "seq_len", "heads", "key_dim",
                                 "blocks", "num_classes"])
  return common.build_graph(config, _attention_loss, "adam", 0.001)


def build_matmul(config: CalibMatmulConfig) -> common.BuiltGraph:
  """Dense layers of several widths and a batched-matmul block."""
  common.check_positive(config, ["batch_size", "groups", "num_classes"])
  if not config.widths or config.widths[-1] % config.groups:
    raise GraphImportError("CalibMatmulConfig: the last width must be a "
                           "multiple of groups")
  return common.build_graph(config, _matmul_loss, "adam", 0.001)


# The step size of calib_embedding's optimizer (Adam's, and any other's,
# 0.001).
_EMBEDDING_LEARNING_RATES = {"sgd": 0.1}


def build_embedding(config: CalibEmbeddingConfig) -> common.BuiltGraph:
  """Embedding lookups with sparse gradients."""
  common.check_positive(config, ["batch_size", "seq_len", "vocab", "dim",
                                 "num_classes"])
  return common.build_graph(config, _embedding_loss, config.optimizer,
                            _EMBEDDING_LEARNING_RATES.get(config.optimizer,
                                                          0.001))


def build_elementwise(config: CalibElementwiseConfig) -> common.BuiltGraph:
  """A chain of element-wise and data-movement ops."""
  common.check_positive(config, ["batch_size", "width", "repeats"])
  if config.width % 4:
    raise GraphImportError("CalibElementwiseConfig.width must be a "
                           "multiple of 4")
  return common.build_graph(config, _elementwise_loss, "sgd", 0.01)


def build_loop(config: CalibLoopConfig) -> common.BuiltGraph:
  """A GRU in a While loop, trained through its gradient loop."""
  common.check_positive(config, ["batch_size", "seq_len", "input_dim",
                                 "hidden", "num_classes"])
  return common.build_graph(config, _loop_loss, "adam", 0.001)


# Suite name -> (model name, config overrides) of each graph measured. The
# four convolution graphs put strided (3x3 and 1x1) convolutions at eight
# sizes, 0.15 to 1,400 us of work on this machine's cores, for their own
# curve (`calibration_fit`); the 4 x 32 x 32 x 16 one fills 10-100 us,
# where small_cnn's stride-2 convolutions are. The three depthwise graphs
# run each depthwise type 18 times (9 strided), 0.04 to 10 MFLOP, 3x3
# and 5x5: MobileNetV2's (alpha 0.35, 64 x 64, batch 8) are 0.1-2.4 MFLOP.
# The three attention graphs run Keras attention's 11 equations (36
# einsums a graph, 0.03 to 34 MFLOP each) and 4 NCHW batch norms
# (forward and gradient) over 128 to 1,024 rows of 32 to 128, widths 32
# to 128; keras_transformer's are 512 rows of 64. The two loop graphs run
# 8 and 16 trips of GRUs 32 and 128 wide (their frames 19 loop variables
# forward, 22 in the gradient), whose TensorList pushes and pops move a few
# bytes (shapes) to 200 KB (the gradient keeps each trip's read of the
# weights too). The two Adam embedding graphs' tables (two of 512 KB, two
# of 10 MB) are in copy-on-read mode: each dense read or update of a table
# or its slots copies it whole (`graph.variable_copies`), ~4x slower per
# byte than an element-wise op of the same size on this host's cores, so
# the copies' fit spans both sizes: fitted on the small tables alone, a
# 26 MB table's copies were charged 2.5x under their traced time; with
# both, 1.7x (a 13 MB table's 1.2x; past the caches a byte costs more).
SUITES: Dict[str, List[Tuple[str, dict]]] = {
    "default": [
        ("calib_conv", dict(batch_size=4, image_size=16, channels=8,
                            projection=True)),
        ("calib_conv", dict(batch_size=4, image_size=32, channels=16,
                            projection=True)),
        ("calib_conv", dict(batch_size=8, image_size=32, channels=32,
                            projection=True)),
        ("calib_conv", dict(batch_size=16, image_size=32, channels=64,
                            projection=True)),
        ("calib_depthwise", dict(batch_size=8, image_size=32, channels=16)),
        ("calib_depthwise", dict(batch_size=8, image_size=16, channels=96,
                                 kernel_size=5)),
        ("calib_depthwise", dict(batch_size=8, image_size=8, channels=288)),
        ("calib_attention", dict(batch_size=8, seq_len=16, heads=2,
                                 key_dim=16)),
        ("calib_attention", dict(batch_size=8, seq_len=32, heads=4,
                                 key_dim=16)),
        ("calib_attention", dict(batch_size=16, seq_len=64, heads=4,
                                 key_dim=32)),
        ("calib_matmul", dict(batch_size=16, widths=(64, 128, 32))),
        ("calib_matmul", dict(batch_size=64, widths=(512, 256, 1024),
                              num_classes=512)),
        ("calib_embedding", dict(batch_size=16, seq_len=8, dim=32)),
        ("calib_embedding", dict(batch_size=64, seq_len=32, vocab=5000,
                                 dim=128, num_classes=2000)),
        ("calib_embedding", dict(batch_size=32, seq_len=16, vocab=2000,
                                 dim=64, optimizer="adam")),
        ("calib_embedding", dict(batch_size=32, seq_len=16, vocab=20000,
                                 dim=128, optimizer="adam")),
        ("calib_elementwise", dict(batch_size=16, width=256, gelu=True)),
        ("calib_elementwise", dict(batch_size=128, width=2048, gelu=True)),
        ("calib_loop", dict(batch_size=8, seq_len=8, input_dim=16, hidden=32)),
        ("calib_loop", dict(batch_size=32, seq_len=16, input_dim=64,
                            hidden=128)),
    ],
    "tiny": [
        ("calib_matmul", dict(batch_size=4, widths=(16, 32, 16))),
        ("calib_elementwise", dict(batch_size=4, width=64)),
    ],
}


def suite(name: str = "default") -> List[Tuple[str, dict]]:
  """The (model name, config overrides) of a calibration suite.

  Raises:
    GraphImportError: unknown suite name.
  """
  if name not in SUITES:
    raise GraphImportError(f"unknown calibration suite {name!r}; choose one "
                           f"of {sorted(SUITES)}")
  return list(SUITES[name])
