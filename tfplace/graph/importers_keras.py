"""Keras (tf_keras) model -> a graph-mode training step as an OpGraph.

A functional or Sequential model is cloned into a fresh `tf.Graph`, its
variables initialized from the model's current weights, fed constant data
(the given `x`, `y`, or seeded random data of `batch_size`), and trained by
the graph-mode (legacy) twin of the optimizer. The ops are named "loss",
"train" and "init"; the data "x" and "y", or "x_0", "x_1", ... and "y_0",
... for a model with several inputs or outputs (each output's loss is
averaged over the batch and the outputs' losses are summed, as
`Model.compile` does with equal weights). A subclassed model cannot be
cloned, and the newer optimizers (AdamW, Lion, Adafactor) have no graph-mode
twin: then the step is a tf.function on the model's own variables (a fresh
optimizer of the same class and config), imported by `importers_function`.
"""

import dataclasses
import inspect
from typing import Optional, Sequence, Tuple

from absl import logging
import numpy as np

from tfplace.errors import GraphImportError
from tfplace.graph.function_captures import embeds_weights
from tfplace.graph.op_graph import OpGraph


def from_keras(model, loss=None, optimizer=None, batch_size: int = 32, x=None,
               y=None, name: Optional[str] = None, unknown_dim: int = 1,
               seed: int = 0, train_ops: Optional[Sequence[str]] = None,
               init_ops: Optional[Sequence[str]] = None,
               loop_trip_counts=None) -> OpGraph:
  """Imports one training step of a Keras model.

  Args:
    model: a built tf_keras model.
    loss: a Keras loss (name, function or Loss object), the same for every
      output; or for several outputs a list (one per output, in
      `model.outputs` order) or a dict keyed by output name. Default: the
      loss the model was compiled with.
    optimizer: a Keras optimizer (name or instance; default: the one the
      model was compiled with, else SGD); the legacy optimizer of
      the same class and config runs the update (a subclassed model, or an
      optimizer without a legacy twin such as AdamW: a new instance of the
      same class and config, in a traced tf.function).
    batch_size: rows of random data when `x` is not given.
    x: sample inputs (become Consts): an array, or for a model with several
      inputs a list (in `model.inputs` order) or a dict keyed by input name.
    y: sample labels (random labels fitting the loss if not given): an
      array, or a list / dict (by output name) for several outputs.
    name: graph name (default: the model's name).
    unknown_dim: size of unknown non-batch dimensions.
    seed: seeds the random data and the graph (dropout).
    train_ops: ignored unless given (default: the "train" op).
    init_ops: ignored unless given (default: the "init" op).
    loop_trip_counts: trip counts of loops that are not static (see
      `tfplace.graph.importers.import_graph`).

  Returns:
    The OpGraph of one step.
  """
  from tfplace.graph import importers
  if getattr(model, "_is_compiled", False):
    loss = model.loss if loss is None else loss
    optimizer = model.optimizer if optimizer is None else optimizer
  if loss is None:
    raise GraphImportError("importing a Keras model needs loss= (or a model "
                           "compiled with a loss)")
  optimizer = "sgd" if optimizer is None else optimizer
  if not model.built:
    raise GraphImportError(f"Keras model {model.name!r} is not built; call it "
                           "on data or give it an input shape first")
  _warn_own_train_step(model)
  functional = getattr(model, "_is_graph_network", False)
  twin = _legacy_optimizer(optimizer)  # Eagerly: reads values.
  if not functional or twin is None or holds_tables(model):
    return _from_traced_step(model, loss, optimizer, batch_size, x, y,
                             name, unknown_dim, seed, train_ops, init_ops,
                             loop_trip_counts)
  step = _graph_step(model, loss, twin, batch_size, x, y, unknown_dim, seed,
                     train_ops, init_ops)
  return importers.from_graph_def(
      step.graph_def, step.train_ops, step.loss, step.init_ops,
      name=name or model.name, unknown_dim=unknown_dim,
      loop_trip_counts=loop_trip_counts)


def _warn_own_train_step(model) -> None:
  """Warns that a model's own `train_step` is not what is imported."""
  import tf_keras
  if type(model).train_step is not tf_keras.Model.train_step:
    logging.warning(
        "Keras model %r overrides train_step: import_graph builds the "
        "standard step (loss, gradients, optimizer), not yours; to import "
        "the step fit runs, use tfplace.apply.import_fit_step(model, x, y)",
        model.name)


def holds_tables(model) -> bool:
  """True if the model (or layer) holds a lookup table (a
  `TextVectorization`, `StringLookup` or `IntegerLookup` layer's
  vocabulary): such a model's layers cannot be cloned into a graph, so its
  step is traced (the tables become tables of the imported graph,
  `function_captures`)."""
  import tensorflow as tf
  resource = tf.saved_model.experimental.TrackableResource
  return any(isinstance(o, resource)
             for o in tf.train.TrackableView(model).descendants())


@dataclasses.dataclass(frozen=True)
class GraphStep:
  """A functional Keras model's training step as a graph-mode GraphDef.

  Attributes:
    graph_def: the step and its init, nothing else.
    train_ops: the op that trains ("train").
    loss: the loss tensor ("loss:0").
    init_ops: the op that sets the variables ("init").
  """
  graph_def: object
  train_ops: Tuple[str, ...]
  loss: str
  init_ops: Tuple[str, ...]


def graph_step(model, loss, optimizer="sgd", batch_size: int = 32, x=None,
               y=None, unknown_dim: int = 1, seed: int = 0) -> GraphStep:
  """A functional model's training step in graph mode (see `from_keras`),
  not imported: for a graph to run as it is (`tfplace.models` builds
  benchmark models from Keras with it).

  Raises:
    GraphImportError: a subclassed model, or an optimizer without a
      graph-mode twin (their steps are traced: use `from_keras`).
  """
  twin = _legacy_optimizer(optimizer)
  if not getattr(model, "_is_graph_network", False) or twin is None:
    raise GraphImportError("graph_step needs a functional model and an "
                           "optimizer with a graph-mode twin")
  return _graph_step(model, loss, twin, batch_size, x, y, unknown_dim, seed)


def _graph_step(model, loss, twin, batch_size, x, y, unknown_dim, seed,
                train_ops=None, init_ops=None) -> GraphStep:
  loss_fns = _losses(loss, list(model.output_names))
  x, y = _data(model, loss_fns, batch_size, x, y, unknown_dim, seed)
  opt_cls, opt_config = twin
  weights = model.get_weights() if embeds_weights(
      sum((w.shape.num_elements() or 0) * w.dtype.size for w in model.weights),
      f"Keras model {model.name!r}") else None
  try:
    graph, loss_t, train, init = _build_step(model, loss_fns, opt_cls,
                                             opt_config, weights, x, y, seed)
  finally:
    _restore_v2_classes(model)
  # Keep only what the step and the init need: cloning also called the model
  # on its Input placeholder, and the clone's random initializers are unused.
  train_ops = tuple(train_ops or [train.name])
  init_ops = tuple(init_ops or [init.name])
  graph_def = _needed_subgraph(graph.as_graph_def(),
                               list(train_ops + init_ops) + [loss_t.op.name])
  return GraphStep(graph_def, train_ops, loss_t.name, init_ops)


def _build_step(model, loss_fns, opt_cls, opt_config, weights, x, y, seed):
  """Builds (graph, loss tensor, train op, init op) in a fresh graph; `x`,
  `y`: one array per input / output, `loss_fns` one loss per output."""
  import tensorflow as tf
  import tf_keras
  graph = tf.Graph()
  with graph.as_default():
    tf.compat.v1.set_random_seed(seed)
    clone = tf_keras.models.clone_model(model)
    x_t = [tf.constant(v, name=_data_name("x", i, len(x)))
           for i, v in enumerate(x)]
    pred = clone(x_t[0] if len(x_t) == 1 else x_t, training=True)
    pred = pred if isinstance(pred, (list, tuple)) else [pred]
    total = tf.add_n([
        tf.reduce_mean(fn(tf.constant(v, name=_data_name("y", i, len(y))), p))
        for i, (fn, v, p) in enumerate(zip(loss_fns, y, pred))])
    if clone.losses:
      total = total + tf.add_n(clone.losses)
    loss_t = tf.identity(total, name="loss")
    opt = opt_cls(**opt_config)
    variables = clone.trainable_variables
    grads = _unscaled(opt, tf.compat.v1.gradients(_scaled(opt, loss_t),
                                                  variables))
    apply = opt.apply_gradients(zip(grads, variables))
    train = tf.group([apply] + _updates(
        clone, x_t[0] if len(x_t) == 1 else x_t), name="train")
    init = _initializer(weights, clone)
  return graph, loss_t, train, init


def _from_traced_step(model, loss, optimizer, batch_size, x, y, name,
                      unknown_dim, seed, train_ops, init_ops,
                      loop_trip_counts) -> OpGraph:
  """A subclassed model (its layers cannot be cloned into a graph), or a
  model whose optimizer has no graph-mode twin: its training step as a
  tf.function on the model's own variables, with a fresh optimizer of the
  same class and config, imported through `importers_function` (the data
  are Consts, the variables start from the model's weights; tracing runs
  nothing, so the model is left as it was).
  """
  import tensorflow as tf
  import tf_keras
  from tfplace.graph import importers
  spec = getattr(model, "_saved_model_inputs_spec", None)
  specs = tf.nest.flatten(spec) if spec is not None else []
  if x is None and not specs:
    raise GraphImportError(f"Keras model {model.name!r} is subclassed and "
                           "its input shape is unknown: give x=")
  # The data as the model is called with: the given structure (arrays,
  # lists, tuples or dicts of arrays), or the one the model was built on.
  structure = spec if x is None else x
  rng = np.random.RandomState(seed)
  x = [np.asarray(v) for v in tf.nest.flatten(x)] if x is not None else [
      _random_input(_concrete_shape(s.shape, batch_size, unknown_dim),
                    s.dtype, rng) for s in specs]
  # The outputs' shapes, traced (nothing runs).
  outputs = tf.nest.flatten(tf.function(lambda: model(
      tf.nest.pack_sequence_as(structure, [tf.constant(v) for v in x]),
      training=False)).get_concrete_function().structured_outputs)
  output_names = [f"output_{i + 1}" for i in range(len(outputs))]
  if getattr(model, "_is_graph_network", False):
    output_names = list(model.output_names)
  loss_fns = _losses(loss, output_names)
  if y is None:
    y = [_labels(tuple(o.shape), fn, rng) for o, fn in zip(outputs, loss_fns)]
  else:
    y = _as_list(y, output_names, "y")
  if isinstance(optimizer, str):
    opt = getattr(tf_keras.optimizers, _optimizer_name(optimizer))()
  else:
    config = optimizer.get_config()
    schedule = _learning_rate_schedule(optimizer)
    if schedule is not None:  # Its own class too, not deserialized.
      config["learning_rate"] = schedule
    opt = type(optimizer).from_config(config)

  @tf.function
  def train_step():
    tf.random.set_seed(seed)
    x_t = [tf.constant(v, name=_data_name("x", i, len(x)))
           for i, v in enumerate(x)]
    with tf.GradientTape() as tape:
      pred = tf.nest.flatten(model(tf.nest.pack_sequence_as(structure, x_t),
                                   training=True))
      total = tf.add_n([
          tf.reduce_mean(fn(tf.constant(v, name=_data_name("y", i, len(y))),
                            p))
          for i, (fn, v, p) in enumerate(zip(loss_fns, y, pred))])
      if model.losses:
        total = total + tf.add_n(model.losses)
      scaled = _scaled(opt, total)
    grads = _unscaled(opt, tape.gradient(scaled, model.trainable_variables))
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return tf.identity(total, name="loss")

  return importers.from_function(
      train_step.get_concrete_function(), train_ops=train_ops,
      init_ops=init_ops, name=name or model.name, unknown_dim=unknown_dim,
      loop_trip_counts=loop_trip_counts)


def _scaled(opt, loss):
  """The loss a LossScaleOptimizer (mixed precision) differentiates: scaled,
  as its training step does (`_unscaled` undoes it on the gradients)."""
  return opt.get_scaled_loss(loss) if hasattr(opt, "get_scaled_loss") else loss


def _unscaled(opt, grads) -> list:
  if hasattr(opt, "get_unscaled_gradients"):
    return opt.get_unscaled_gradients(grads)
  return grads


def _restore_v2_classes(model) -> None:
  """Switches the model's layer classes back to their eager (v2) bases.

  tf_keras rewrites a layer class's bases to the v1 (graph) versions when an
  instance is made inside a graph, which breaks the user's eager model until
  the class is instantiated eagerly again. This undoes it.
  """
  from tf_keras.src.engine import base_layer, base_layer_v1, training
  from tf_keras.src.engine import training_v1
  from tf_keras.src.utils import version_utils
  for cls in {type(m) for m in [model] + list(model.submodules)}:
    if issubclass(cls, (training.Model, training_v1.Model)):
      version_utils.swap_class(cls, training.Model, training_v1.Model, True)
    if issubclass(cls, (base_layer.Layer, base_layer_v1.Layer)):
      version_utils.swap_class(cls, base_layer.Layer, base_layer_v1.Layer,
                               True)


def _needed_subgraph(graph_def, targets: Sequence[str]):
  """The nodes `targets` depend on (data or control), in GraphDef order."""
  inputs = {n.name: n.input for n in graph_def.node}
  needed, stack = set(), list(targets)
  while stack:
    name = stack.pop()
    if name not in needed:
      needed.add(name)
      stack.extend(i.lstrip("^").split(":")[0] for i in inputs[name])
  out = type(graph_def)()
  out.versions.CopyFrom(graph_def.versions)
  out.library.CopyFrom(graph_def.library)
  out.node.extend(n for n in graph_def.node if n.name in needed)
  return out


def _updates(model, inputs) -> list:
  """State updates (e.g. BatchNorm statistics) of the call on `inputs`.

  Only these: the clone's own symbolic call on its Input placeholder made
  updates too, which would need a feed.
  """
  if not hasattr(model, "get_updates_for"):
    return []
  return list(model.get_updates_for(None)) + list(
      model.get_updates_for(inputs))


def _initializer(weights, clone):
  """The "init" op: model weights assigned (None: the clone's own
  initializers), other variables initialized."""
  import tensorflow as tf
  if weights is None:
    weights = []
  elif len(weights) != len(clone.weights):
    raise GraphImportError("the cloned model has different weights")
  assigns = [v.assign(w) for v, w in zip(clone.weights, weights)]
  cloned = {id(v) for v in clone.weights[:len(weights)]}
  others = [v for v in tf.compat.v1.global_variables() if id(v) not in cloned]
  return tf.group(assigns + [tf.compat.v1.variables_initializer(others)],
                  name="init")


def _legacy_optimizer(optimizer):
  """The tf_keras legacy (graph-mode) optimizer class and kwargs to make it,
  or None when it has none (AdamW, Lion, Adafactor: the step is traced).

  Call eagerly: reading a Keras 3-style optimizer's config needs eager values.

  Raises:
    GraphImportError: an optimizer name tf_keras does not know.
  """
  import tf_keras
  legacy = tf_keras.optimizers.legacy
  if hasattr(optimizer, "inner_optimizer"):  # A LossScaleOptimizer.
    inner = _legacy_optimizer(optimizer.inner_optimizer)
    if inner is None:
      return None
    inner_cls, inner_config = inner
    scale = {k: v for k, v in optimizer.get_config().items()
             if k in ("dynamic", "initial_scale", "dynamic_growth_steps")}
    return (lambda: tf_keras.mixed_precision.LossScaleOptimizer(
        inner_cls(**inner_config), **scale)), {}
  if isinstance(optimizer, str):
    cls = getattr(legacy, _optimizer_name(optimizer), None)
    return None if cls is None else (cls, {})
  if isinstance(optimizer, legacy.Optimizer):  # Its own class is one.
    cls = type(optimizer)
  else:
    cls = getattr(legacy, type(optimizer).__name__, None)
  if cls is None:
    return None
  params = set(inspect.signature(cls.__init__).parameters)
  config = {k: v for k, v in optimizer.get_config().items()
            if k in params and k != "name"}
  schedule = _learning_rate_schedule(optimizer)
  if schedule is not None:  # The config holds it serialized.
    config["learning_rate"] = schedule
  return cls, config


def _learning_rate_schedule(optimizer):
  """The optimizer's learning-rate schedule object (a
  `LearningRateSchedule`, the user's own class too), or None for a fixed
  rate."""
  import tf_keras
  rate = getattr(optimizer, "_learning_rate", None)  # Optimizers since 2.11.
  if rate is None:
    rate = getattr(optimizer, "_hyper", {}).get("learning_rate")  # Legacy.
  schedules = tf_keras.optimizers.schedules.LearningRateSchedule
  return rate if isinstance(rate, schedules) else None


def _optimizer_name(name: str) -> str:
  """The tf_keras optimizer class that `name` names, in any case ("adamw":
  "AdamW").

  Raises:
    GraphImportError: tf_keras has no optimizer of that name.
  """
  import tf_keras
  names = {n.lower(): n for n, v in vars(tf_keras.optimizers).items()
           if n != "Optimizer" and isinstance(v, type)
           and issubclass(v, tf_keras.optimizers.Optimizer)}
  if name.lower() not in names:
    raise GraphImportError(f"unknown optimizer {name!r}; one of "
                           f"{sorted(names)}")
  return names[name.lower()]


def _data_name(prefix: str, index: int, count: int) -> str:
  return prefix if count == 1 else f"{prefix}_{index}"


def _losses(loss, names: Sequence[str]) -> list:
  """One Keras loss function per model output, the outputs named `names`
  (see `from_keras`)."""
  if isinstance(loss, dict):
    loss = _in_order(loss, names, "loss")
  if isinstance(loss, (list, tuple)):
    if len(loss) != len(names):
      raise GraphImportError(f"loss= lists {len(loss)} losses for a model "
                             f"with {len(names)} outputs")
    return [_loss_function(l) for l in loss]
  return [_loss_function(loss)] * len(names)


def _loss_function(loss):
  """tf_keras's loss function for `loss` (a name, function or Loss)."""
  import tf_keras
  try:
    return tf_keras.losses.get(loss)
  except ValueError as e:
    raise GraphImportError(
        f"unknown loss {loss!r}: give a tf_keras.losses name (e.g. mse, "
        "sparse_categorical_crossentropy), function or Loss object "
        f"({str(e).splitlines()[0]})") from None


def _in_order(by_name: dict, names: Sequence[str], what: str) -> list:
  """The values of `by_name` in the order of `names`, which it must key
  exactly (`what` names the argument in the error)."""
  unknown = sorted(set(by_name) - set(names))
  missing = [n for n in names if n not in by_name]
  if unknown or missing:
    raise GraphImportError(f"{what}= by name must give every one of "
                           f"{list(names)}; unknown {unknown}, missing "
                           f"{missing}")
  return [by_name[n] for n in names]


def _as_list(values, names: Sequence[str], what: str) -> Optional[list]:
  """`values` (None, an array, a list / tuple, or a dict by name) as one
  array per name, in order; None stays None."""
  if values is None:
    return None
  if isinstance(values, dict):
    values = _in_order(values, names, what)
  elif len(names) == 1:  # The array itself (maybe nested lists of rows).
    single = (isinstance(values, (list, tuple)) and len(values) == 1
              and hasattr(values[0], "shape"))
    values = list(values) if single else [values]
  elif not isinstance(values, (list, tuple)):
    values = [values]
  if len(values) != len(names):
    kind = "inputs" if what == "x" else "outputs"
    raise GraphImportError(f"{what}= gives {len(values)} arrays for a model "
                           f"with {len(names)} {kind}")
  return [np.asarray(v) for v in values]


def _data(model, loss_fns, batch_size: int, x, y, unknown_dim: int,
          seed: int) -> Tuple[list, list]:
  """Sample inputs and labels of a functional or Sequential model, one
  array per input / output: the given ones, or seeded random ones
  (`_random_input`; labels fitting each output's loss)."""
  rng = np.random.RandomState(seed)
  x = _as_list(x, list(model.input_names), "x")
  if x is None:
    x = [_random_input(_concrete_shape(shape, batch_size, unknown_dim),
                       t.dtype, rng)
         for t, shape in zip(model.inputs, _shapes(model.input_shape))]
  y = _as_list(y, list(model.output_names), "y")
  if y is not None:
    return x, y
  shapes = _shapes(model.output_shape)
  return x, [_labels(_concrete_shape(shape, len(x[0]), unknown_dim), fn, rng)
             for shape, fn in zip(shapes, loss_fns)]


def _random_input(shape: Tuple[int, ...], dtype, rng) -> np.ndarray:
  """Integer inputs in {0, 1} (valid ids of any table), strings of eight
  random words ("w0" ... "w99"), others normal."""
  if dtype.is_integer:
    return rng.randint(0, 2, size=shape).astype(dtype.as_numpy_dtype)
  if dtype == "string":
    words = rng.randint(0, 100, size=tuple(shape) + (8,))
    return np.array([" ".join(f"w{k}" for k in row)
                     for row in words.reshape(-1, 8)],
                    dtype=object).reshape(shape)
  return rng.randn(*shape).astype(np.float32)


def _shapes(shape) -> list:
  """A Keras `input_shape` / `output_shape` as one shape per tensor."""
  if isinstance(shape, dict):
    return list(shape.values())
  return shape if isinstance(shape, list) else [shape]


def _labels(out: Tuple[int, ...], loss_fn, rng) -> np.ndarray:
  """Random labels of an output of shape `out` that fit its loss."""
  kind = _loss_kind(loss_fn)
  if "sparsecategorical" in kind:
    return rng.randint(0, out[-1], size=out[:-1]).astype(np.int32)
  if "categorical" in kind:
    return np.eye(out[-1], dtype=np.float32)[rng.randint(0, out[-1],
                                                         size=out[:-1])]
  if "binary" in kind or "hinge" in kind:
    return rng.randint(0, 2, size=out).astype(np.float32)
  return rng.randn(*out).astype(np.float32)


def _loss_kind(loss_fn) -> str:
  """The loss's name, lower case without underscores, for either form: a
  function (`sparse_categorical_crossentropy`) or a Loss object
  (`SparseCategoricalCrossentropy(...)`, whose `name` is the function's)."""
  name = (getattr(loss_fn, "name", None) or getattr(loss_fn, "__name__", None)
          or type(loss_fn).__name__)
  return str(name).lower().replace("_", "")


def _concrete_shape(shape, batch: int, unknown_dim: int) -> Tuple[int, ...]:
  return (batch,) + tuple(unknown_dim if d is None else int(d)
                          for d in shape[1:])
