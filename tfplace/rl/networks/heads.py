"""Masked categorical output heads: logits -> a tfp distribution.

tf-agents' agents take no action-mask splitter for these actions, so the mask
lives in the network: a device a unit may not use gets the logit
`MASKED_LOGIT` (probability exactly 0 in float32; finite, so entropies and
log-probabilities of allowed actions stay finite). The mask comes from the
observation and is applied after every learned layer, never normalized.

`independent_categorical` gives one categorical per unit with event shape
[U], the shape of the action spec (tf-agents' stock projection networks give
event shape () and share no weights across units).
"""

import tensorflow as tf
import tensorflow_probability as tfp

MASKED_LOGIT = -1e9


class RowBias(tf.Module):
  """A trainable logit bias per row (unit) and choice: `scale * raw`.

  Adam moves every parameter by about its learning rate per step, whatever
  the gradient's size; `scale` makes the per-unit biases move `scale` times
  faster than the shared network weights under the same optimizer, so a
  unit's choice can change within a search's few hundred train steps.
  """

  def __init__(self, num_rows: int, num_choices: int, scale: float = 1.0,
               name: str = "row_bias"):
    super().__init__(name=name)
    self.scale = float(scale)
    self.raw = tf.Variable(tf.zeros([num_rows, num_choices]), name="raw")

  def __call__(self) -> tf.Tensor:
    return self.scale * self.raw

  def add_to_logits(self, delta) -> None:
    """Adds `delta` [rows, choices] to the logits this bias contributes."""
    self.raw.assign_add(tf.cast(delta, tf.float32) / self.scale)


def masked_logits(logits: tf.Tensor, allowed: tf.Tensor) -> tf.Tensor:
  """`logits` [..., U, K] where `allowed` [..., U, K] (bool), else masked."""
  allowed = tf.cast(allowed, tf.bool)
  logits = tf.broadcast_to(logits, tf.shape(allowed))
  return tf.where(allowed, logits, tf.constant(MASKED_LOGIT, logits.dtype))


def independent_categorical(logits: tf.Tensor) -> tfp.distributions.Independent:
  """One categorical per unit: logits [B, U, K] -> event shape [U]."""
  return tfp.distributions.Independent(
      tfp.distributions.Categorical(logits=logits, dtype=tf.int32),
      reinterpreted_batch_ndims=1)


class SharedCategoricals(tfp.distributions.Distribution):
  """A batch of identical placement distributions: one categorical per unit.

  Every batch entry has the same logits [U, K], so sampling a batch of B
  placements costs O(U K + B U log K) (one cumulative table per unit), and
  log-probabilities cost a gather per sample, where `independent_categorical`
  over logits broadcast to [B, U, K] costs O(B U K) in both. Event shape [U],
  batch shape `batch_shape`.
  """

  def __init__(self, logits, batch_shape, validate_args=False,
               allow_nan_stats=True, name="SharedCategoricals"):
    parameters = dict(locals())
    with tf.name_scope(name) as scope:
      self._logits = tf.convert_to_tensor(logits, dtype=tf.float32)
      self._batch = tf.cast(batch_shape, tf.int32)
      self._static_batch = tf.TensorShape(tf.get_static_value(self._batch))
      super().__init__(
          dtype=tf.int32, validate_args=validate_args,
          allow_nan_stats=allow_nan_stats,
          reparameterization_type=tfp.distributions.NOT_REPARAMETERIZED,
          parameters=parameters, name=scope)

  @property
  def logits(self) -> tf.Tensor:
    """float32 [U, K], shared by every batch entry."""
    return self._logits

  def _batch_shape(self):
    return self._static_batch

  def _batch_shape_tensor(self):
    return self._batch

  def _event_shape(self):
    return self._logits.shape[:1]

  def _event_shape_tensor(self):
    return tf.shape(self._logits)[:1]

  def _sample_n(self, n, seed=None):
    num_units = tf.shape(self._logits)[0]
    count = n * tf.reduce_prod(self._batch)
    draws = tf.random.categorical(self._logits, count, dtype=tf.int32,
                                  seed=seed)  # [U, n * prod(batch)]
    shape = tf.concat([[n], self._batch, [num_units]], axis=0)
    return tf.reshape(tf.transpose(draws), shape)

  def _log_prob(self, x):
    log_probs = tf.nn.log_softmax(self._logits)  # [U, K]
    num_units, num_choices = tf.shape(log_probs)[0], tf.shape(log_probs)[1]
    index = tf.cast(x, tf.int32) + tf.range(num_units) * num_choices
    picked = tf.gather(tf.reshape(log_probs, [-1]), index)
    return tf.reduce_sum(picked, axis=-1)

  def _entropy(self):
    log_probs = tf.nn.log_softmax(self._logits)
    total = -tf.reduce_sum(tf.exp(log_probs) * log_probs)
    return tf.fill(self._batch, total)

  def _mode(self):
    mode = tf.argmax(self._logits, axis=-1, output_type=tf.int32)
    return tf.broadcast_to(mode, tf.concat([self._batch, tf.shape(mode)], 0))


def allowed_everywhere(allowed: tf.Tensor) -> tf.Tensor:
  """bool [U, K] from [..., U, K]: allowed for every batch entry."""
  allowed = tf.cast(allowed, tf.bool)
  return tf.reduce_all(allowed, axis=tf.range(tf.rank(allowed) - 2))


def placement_distribution(logits: tf.Tensor, allowed: tf.Tensor,
                           batch_shape: tf.Tensor, shared: bool):
  """The masked output head over `logits` [U, K] for a batch.

  Args:
    logits: float32 [U, K], the same for every batch entry.
    allowed: bool [U, K] (`shared`) or [*batch_shape, U, K].
    batch_shape: int32, the batch dimensions ([B] or [B, T]).
    shared: `SharedCategoricals` (REINFORCE) or an `Independent(Categorical)`
      over logits broadcast to the batch (PPO logs every sample's logits, so
      it needs per-sample parameters).
  """
  if shared:
    return SharedCategoricals(masked_logits(logits, allowed), batch_shape)
  shape = tf.concat([batch_shape, tf.shape(logits)], axis=0)
  return independent_categorical(masked_logits(
      tf.broadcast_to(logits, shape), tf.broadcast_to(allowed, shape)))
