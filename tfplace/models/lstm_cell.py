"""An unrolled LSTM: one set of ops per time step, so each step is placeable.

The cell is the standard fused-gate LSTM (Hochreiter & Schmidhuber 1997;
Zaremba et al. 2014): ``z = [x, h] W + b``, split into input, candidate,
forget and output gates, with forget bias 1. Layers are unrolled by a Python
loop (no `While` op); step t's ops live in ``<layer scope>/t_<t>/``.
"""

import dataclasses
from typing import List, Optional, Sequence, Tuple

import tensorflow as tf

from tfplace.models import common

_V1 = tf.compat.v1


@dataclasses.dataclass(frozen=True)
class LstmParams:
  """Weights of one LSTM layer (already read, as tensors).

  Attributes:
    kernel: [input_size + hidden, 4 * hidden].
    bias: [4 * hidden].
    hidden: number of units.
  """
  kernel: tf.Tensor
  bias: tf.Tensor
  hidden: int


def lstm_params(input_size: int, hidden: int, init_scale: float) -> LstmParams:
  """Creates one layer's variables in the current variable scope."""
  kernel = common.variable("kernel", [input_size + hidden, 4 * hidden],
                           stddev=init_scale)
  bias = common.variable("bias", [4 * hidden], constant=0.0)
  return LstmParams(kernel=kernel.read_value(), bias=bias.read_value(),
                    hidden=hidden)


def lstm_step(params: LstmParams, x: tf.Tensor, h: tf.Tensor,
              c: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
  """One LSTM step; returns the new (h, c)."""
  z = tf.matmul(tf.concat([x, h], axis=1), params.kernel) + params.bias
  i, j, f, o = tf.split(z, 4, axis=1)
  new_c = tf.sigmoid(f + 1.0) * c + tf.sigmoid(i) * tf.tanh(j)
  new_h = tf.sigmoid(o) * tf.tanh(new_c)
  return new_h, new_c


def zero_state(batch_size: int, hidden: int) -> Tuple[tf.Tensor, tf.Tensor]:
  """The all-zeros initial (h, c)."""
  zeros = tf.zeros([batch_size, hidden], name="zero_state")
  return zeros, zeros


def unrolled_layer(scope: str, inputs: Sequence[tf.Tensor], hidden: int,
                   init_scale: float, reverse: bool = False,
                   residual: bool = False) -> List[tf.Tensor]:
  """Runs one LSTM layer over a list of per-step inputs.

  Args:
    scope: variable and name scope of the layer (e.g. "lstm_0").
    inputs: one [batch, input_size] tensor per time step.
    hidden: number of units.
    init_scale: uniform init range of the kernel.
    reverse: process the steps last to first (a backward direction); the
      outputs are still returned in input order.
    residual: add each step's input to its output (sizes must match).

  Returns:
    One [batch, hidden] output per time step, in input order.
  """
  batch = inputs[0].shape[0]
  input_size = inputs[0].shape[1]
  with _V1.variable_scope(scope):
    params = lstm_params(input_size, hidden, init_scale)
    h, c = zero_state(batch, hidden)
    order = range(len(inputs) - 1, -1, -1) if reverse else range(len(inputs))
    outputs: List[Optional[tf.Tensor]] = [None] * len(inputs)
    for t in order:
      with tf.name_scope(f"t_{t}"):
        h, c = lstm_step(params, inputs[t], h, c)
        outputs[t] = (tf.add(h, inputs[t], name="residual") if residual
                      else h)
  return outputs
