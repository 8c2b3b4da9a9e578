"""Shared pieces of the benchmark graph builders.

Every builder makes a fresh `tf.Graph` in TF1 graph mode, fills it with a
full training step (seeded synthetic input, forward, backward, optimizer
update) and returns a `BuiltGraph`. Conventions shared by all builders:

* the scalar loss is the tensor ``loss:0``;
* the training op is ``train_op`` (it also runs batch-norm statistic updates);
* the initializer is ``init`` (`tf.compat.v1.global_variables_initializer`);
* input data is made in the graph by stateless random ops with a fixed seed,
  and the graph-level seed is set, so step 1's loss is the same on every build;
  with `placeholder_inputs=True` in a config that has it, the inputs are
  placeholders of static shape instead (fed at run time, as TF1 training
  graphs take their data).
"""

import dataclasses
from typing import Any, Callable, List, Optional, Sequence

import tensorflow as tf

from tfplace.errors import GraphImportError

_V1 = tf.compat.v1


@dataclasses.dataclass(frozen=True)
class BuiltGraph:
  """A training graph ready to import or to run in a Session.

  Attributes:
    graph: the tf.Graph holding the training step.
    train_op: name of the op that runs one training step.
    loss: name of the scalar loss tensor (e.g. "loss:0").
    init_op: name of the variable initializer op.
    config: the model config the graph was built from.
  """
  graph: tf.Graph
  train_op: str
  loss: str
  init_op: str
  config: Any


_OPTIMIZERS = {
    "sgd": lambda lr: _V1.train.GradientDescentOptimizer(lr),
    "adam": lambda lr: _V1.train.AdamOptimizer(lr),
    "momentum": lambda lr: _V1.train.MomentumOptimizer(lr, momentum=0.9),
    "rmsprop": lambda lr: _V1.train.RMSPropOptimizer(
        lr, decay=0.9, momentum=0.9, epsilon=1.0),
}


def make_optimizer(name: str, learning_rate: float):
  """Returns a tf.compat.v1.train optimizer by name.

  Args:
    name: one of "sgd", "adam", "momentum", "rmsprop".
    learning_rate: the step size.

  Raises:
    GraphImportError: for an unknown optimizer name.
  """
  if name not in _OPTIMIZERS:
    raise GraphImportError(
        f"unknown optimizer {name!r}; choose one of {sorted(_OPTIMIZERS)}")
  return _OPTIMIZERS[name](learning_rate)


def build_graph(config: Any, body: Callable[[Any], tf.Tensor],
                optimizer: str, learning_rate: float,
                update_ops: Optional[Callable[[], Sequence[tf.Operation]]] = None
                ) -> BuiltGraph:
  """Builds a full training step in a fresh graph.

  Args:
    config: the model config (kept in the result); must have a `seed` field.
    body: called inside the graph with `config`; returns the scalar loss
      before naming (it is renamed to ``loss``).
    optimizer: optimizer name for `make_optimizer`.
    learning_rate: the optimizer's step size.
    update_ops: optional callable returning ops the step must also run
      (batch-norm moving averages); called after `body`.

  Returns:
    The `BuiltGraph`.
  """
  graph = tf.Graph()
  with graph.as_default():
    _V1.set_random_seed(config.seed)
    loss = tf.identity(body(config), name="loss")
    extra = list(update_ops()) if update_ops else []
    opt = make_optimizer(optimizer, learning_rate)
    if extra:
      train = tf.group(opt.minimize(loss), *extra, name="train_op")
    else:
      train = opt.minimize(loss, name="train_op")
    init = _V1.variables_initializer(_V1.global_variables(), name="init")
  return BuiltGraph(graph=graph, train_op=train.name, loss=loss.name,
                    init_op=init.name, config=config)


def variable(name: str, shape: Sequence[int], stddev: Optional[float] = None,
             constant: Optional[float] = None,
             trainable: bool = True) -> tf.Variable:
  """Creates a resource variable in the current variable scope.

  Args:
    name: variable name inside the scope.
    shape: its shape.
    stddev: uniform init in [-stddev, stddev]; default glorot-uniform.
    constant: initialize every element to this value instead.
    trainable: whether the optimizer updates it.
  """
  if constant is not None:
    init = _V1.constant_initializer(constant)
  elif stddev is not None:
    init = _V1.random_uniform_initializer(-stddev, stddev)
  else:
    init = _V1.glorot_uniform_initializer()
  return _V1.get_variable(name, shape=list(shape), initializer=init,
                          trainable=trainable, use_resource=True)


def dense(x: tf.Tensor, units: int, scope: str, *, bias_add: bool = False,
          flatten: bool = False,
          activation: Optional[Callable[[tf.Tensor], tf.Tensor]] = None
          ) -> tf.Tensor:
  """A fully connected layer, `activation(x @ weights + bias)`, its
  variables and ops in the variable scope `scope`.

  Args:
    x: input [batch, in] ([..., in] with `flatten`).
    units: output width.
    scope: variable scope (and name scope) of the layer.
    bias_add: add the bias with a BiasAdd op (else AddV2).
    flatten: reshape x to [-1, in] for the MatMul and the result back to
      [..., units].
    activation: applied last, inside the scope (None: linear).
  """
  with _V1.variable_scope(scope):
    weights = variable("weights", [x.shape[-1], units])
    bias = variable("bias", [units], constant=0.0)
    shape = x.shape.as_list()
    if flatten:
      x = tf.reshape(x, [-1, shape[-1]])
    y = tf.matmul(x, weights)
    y = tf.nn.bias_add(y, bias) if bias_add else y + bias
    if flatten:
      y = tf.reshape(y, shape[:-1] + [units])
    return activation(y) if activation is not None else y


def synthetic_tokens(shape: Sequence[int], vocab: int, seed: int,
                     name: str, placeholder: bool = False) -> tf.Tensor:
  """Seeded in-graph int32 token ids in [0, vocab), or an int32 placeholder
  of that shape."""
  if placeholder:
    return _V1.placeholder(tf.int32, list(shape), name=name)
  return tf.random.stateless_uniform(list(shape), seed=[seed, 17], minval=0,
                                     maxval=vocab, dtype=tf.int32, name=name)


def synthetic_normal(shape: Sequence[int], seed: Sequence[int], name: str,
                     placeholder: bool = False) -> tf.Tensor:
  """Seeded in-graph standard normal float32 values, or a float32
  placeholder of that shape."""
  if placeholder:
    return _V1.placeholder(tf.float32, list(shape), name=name)
  return tf.random.stateless_normal(list(shape), seed=list(seed), name=name)


def mean_xent(logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
  """Mean sparse softmax cross-entropy over all rows."""
  xent = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=logits)
  return tf.reduce_mean(xent)


def check_positive(config: Any, fields: Sequence[str]) -> None:
  """Raises GraphImportError if any named config field is not positive."""
  for field in fields:
    value = getattr(config, field)
    if not value > 0:
      raise GraphImportError(
          f"{type(config).__name__}.{field} must be positive, got {value!r}")


def run_steps(built: BuiltGraph, num_steps: int = 1,
              optimize: bool = False) -> List[float]:
  """Initializes a fresh Session and runs training steps (for tests, demos).

  Args:
    built: the graph to run.
    num_steps: training steps to run.
    optimize: run grappler's graph rewrites (slow to start on large graphs;
      off by default, which does not change the values computed).

  Returns:
    The loss of each step, computed before that step's update.
  """
  config = _V1.ConfigProto()
  config.graph_options.rewrite_options.disable_meta_optimizer = not optimize
  losses = []
  with _V1.Session(graph=built.graph, config=config) as session:
    session.run(built.init_op)
    for _ in range(num_steps):
      loss, _ = session.run([built.loss, built.train_op])
      losses.append(float(loss))
  return losses
