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
