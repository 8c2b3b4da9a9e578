"""A placement applied to a Keras model trained with `fit`.

`fit` runs `model.train_function`, a `tf.function` around `model.train_step`.
The graph to place is that step as `fit` traces it:

    graph = tfplace.apply.keras.import_fit_step(model, x[:32], y[:32])
    placement = tfplace.place(graph, cluster)
    placed = tfplace.apply(model, placement, args=(x[:32], y[:32]))
    placed.fit(x, y, batch_size=32, epochs=3)

`import_fit_step` traces `train_step` with a batch dimension of None (as
`fit` feeds it), so the op names are the ones `fit`'s trace creates; only
`fit`'s own ops (the iterator, `IteratorGetNext`, the step counter) are not
in it.

`tfplace.apply(model, placement, args=...)` returns a placed copy of the model
(the model itself is left as it is): `tf_keras.models.clone_model` with the
same layer names and weights, compiled from `model.get_compile_config()` (or
by `compile_fn`), with every variable (weights, a fresh optimizer's
iteration counter and slots, the metrics) created on the device the
placement gives its colocation group, and its `train_function` a
`PlacedFunction` around the one Keras makes. Calling `compile` again on the
copy drops the placement (Keras rebuilds `train_function`); apply it again.
The optimizer starts afresh (iteration 0, zero slots), as in a new model.
"""

import contextlib
from typing import Callable, Dict, Optional, Sequence

from tfplace.apply.device_function import check_devices_exist
from tfplace.apply.function import PlacedFunction, plan_build
from tfplace.apply.options import ApplyOptions
from tfplace.apply.variables import VariableReplay
from tfplace.errors import PlacementError, TfplaceError
from tfplace.placement import Placement


def batch_signature(args: Sequence) -> list:
  """TensorSpecs of a sample batch (x, y), batch dimension None."""
  import tensorflow as tf

  def spec(value):
    t = tf.convert_to_tensor(value)
    return tf.TensorSpec([None] + t.shape.as_list()[1:], t.dtype)

  return [tf.nest.map_structure(spec, a) for a in args]


def _relaxed(spec):
  import tensorflow as tf
  if isinstance(spec, tf.TensorSpec) and spec.shape.rank:
    return tf.TensorSpec([None] + spec.shape.as_list()[1:], spec.dtype)
  return spec


def iterator_signature(args: Sequence) -> list:
  """The input signature of `fit`'s train function for its first call's
  iterator: its element spec with the batch dimension None. `fit` feeds a
  static batch dimension when the batch size divides the samples; relaxed,
  the trace is the one `import_fit_step` imported."""
  import tensorflow as tf
  spec = tf.nest.map_structure(_relaxed, args[0].element_spec)
  return [tf.data.IteratorSpec(spec)]


def fit_step_function(model, args: Sequence):
  """A tf.function of (x, y) or (x, y, sample_weight) running
  `model.train_step` as `fit` does."""
  import tensorflow as tf
  if len(args) == 3:
    step = lambda x, y, sample_weight: model.train_step((x, y, sample_weight))
  else:
    step = lambda x, y: model.train_step((x, y))
  return tf.function(step, input_signature=batch_signature(args))


def import_fit_step(model, x, y, sample_weight=None,
                    name: Optional[str] = None):
  """The `OpGraph` of the training step `model.fit` runs, on batch (x, y).

  Optimizer slots are colocated with their variables (see
  `tfplace.apply.importing`).

  Args:
    model: a compiled Keras (tf_keras) model.
    x: a sample batch of inputs (its values become Consts of the graph).
    y: the batch's labels.
    sample_weight: the batch's sample weights, for a model trained with
      `fit(..., sample_weight=)` (or `class_weight=`, which fit turns into
      sample weights): its step weighs the loss.
    name: graph name (default: the model's name).

  Raises:
    TfplaceError: the model is not compiled.
  """
  from tfplace.apply.importing import import_step
  _check_compiled(model)
  args = (x, y) if sample_weight is None else (x, y, sample_weight)
  return import_step(fit_step_function(model, args), args=args,
                     optimizers=[model.optimizer], name=name or model.name)


def apply_to_model(model, placement: Placement, args: Sequence,
                   options: Optional[ApplyOptions] = None,
                   compile_fn: Optional[Callable] = None):
  """A placed copy of a compiled Keras model, to train with `fit`.

  Args:
    model: a compiled, built Keras model (Sequential or functional).
    placement: the placement of `import_fit_step(model, ...)`'s graph.
    args: a sample batch (x, y), or (x, y, sample_weight) for a model
      trained with sample or class weights, as given to `import_fit_step`
      (shapes and dtypes; batch size free).
    options: apply options.
    compile_fn: compiles the copy (default: the model's compile config).

  Returns:
    The copy; its `train_function.report` describes the placed trace after
    the first `fit` step.

  Raises:
    PlacementError: the placement does not fit the model's step.
    TfplaceError: the model cannot be copied or compiled.
  """
  import tensorflow as tf
  options = options or ApplyOptions()
  _check_compiled(model)
  check_devices_exist(placement)
  if args is None or len(args) not in (2, 3):
    raise PlacementError("placing a Keras model needs args=(x, y) or (x, y, "
                         "sample_weight), a sample batch")

  tables = _table_devices(model, placement, args)

  def build():
    return _copy(model, compile_fn, tables)

  def trace(copy):
    return fit_step_function(copy, args).get_concrete_function().graph

  plan, _ = plan_build(build, trace, placement, options)
  replay = VariableReplay(plan)
  with replay.scope():
    placed = build()
    placed.set_weights(model.get_weights())
    for name, device in tables.items():  # Its set_weights made them anew.
      with tf.device(device):
        placed.get_layer(name).set_weights(model.get_layer(name).get_weights())
  keras_fn = placed.make_train_function(force=True)
  placed.train_function = PlacedFunction(
      keras_fn.python_function, placement, options, reduce_retracing=True,
      replay=replay, signature_of=iterator_signature)
  return placed


def _check_compiled(model) -> None:
  if getattr(model, "optimizer", None) is None or not getattr(
      model, "compiled_loss", None):
    raise TfplaceError(f"Keras model {model.name!r} is not compiled; call "
                       "model.compile(optimizer, loss) first")
  if not model.built:
    raise TfplaceError(f"Keras model {model.name!r} is not built; call it on "
                       "data or give it an input shape first")
  if model.run_eagerly:
    raise TfplaceError("run_eagerly=True runs no traced step to place")
  if model.jit_compile:
    raise TfplaceError("jit_compile=True compiles the step with XLA as one "
                       "cluster, which ignores per-op devices; compile with "
                       "jit_compile=False")
  spe = model.steps_per_execution
  if spe is not None and int(spe.numpy()) != 1:
    raise TfplaceError("steps_per_execution > 1 runs the step in a loop "
                       "whose ops the placement does not name; use 1")


def _table_devices(model, placement: Placement, args: Sequence
                   ) -> Dict[str, str]:
  """Layer name -> the device the placement gives the lookup table the
  layer holds (a TextVectorization or StringLookup layer's vocabulary; the
  table's op in the imported step is its captured handle, named in the
  layer's scope), for the model's layers that hold one. TF runs a table's
  lookups where the table lives, and a table, unlike a variable, lives
  where it is created."""
  from tfplace.graph.importers_keras import holds_tables
  layers = [layer.name for layer in model.layers if holds_tables(layer)]
  if not layers:
    return {}
  graph = fit_step_function(model, args).get_concrete_function().graph
  devices = {}
  for _, handle in graph.captures:
    device = placement.devices.get(handle.op.name)
    if device and any(op.type.startswith("LookupTable")
                      for op in handle.consumers()):
      for layer in layers:
        if handle.op.name.startswith(f"{model.name}/{layer}/"):
          devices[layer] = device
  return devices


def _copy(model, compile_fn: Optional[Callable],
          table_devices: Optional[Dict[str, str]] = None):
  """The model cloned (same layer names) and compiled like it; a layer in
  `table_devices` is made on its device (its lookup table is created
  there)."""
  import tensorflow as tf
  import tf_keras

  def clone(layer):
    device = table_devices.get(layer.name)
    with tf.device(device) if device else contextlib.nullcontext():
      return layer.__class__.from_config(layer.get_config())

  try:
    copy = tf_keras.models.clone_model(
        model, clone_function=clone if table_devices else None)
  except (ValueError, TypeError) as e:
    raise TfplaceError(
        f"cannot copy Keras model {model.name!r} to place it ({e}); a "
        "subclassed model: build it inside tfplace.apply(make_step, "
        "placement, factory=True, ...) instead") from None
  _same_inner_names(model, copy)
  try:
    if compile_fn is not None:
      compile_fn(copy)
    else:
      copy.compile_from_config(model.get_compile_config())
  except (ValueError, TypeError) as e:
    raise TfplaceError(
        f"cannot compile the placed copy of {model.name!r} from its compile "
        f"config ({e}); pass compile_fn=lambda m: m.compile(...)") from None
  return copy


def _same_inner_names(model, copy) -> None:
  """Names the copy's inner layers as the model's.

  `clone_model` keeps the names of the model's own layers, but a layer made
  inside another one's build (MultiHeadAttention's softmax and dropout) is
  named afresh, "softmax_1" for "softmax", and so are the ops under it: the
  placement would not name them. Layers pair up in tracking order; where
  the two trees differ nothing is renamed.
  """
  ours = list(model._flatten_layers(include_self=False))  # pylint: disable=protected-access
  theirs = list(copy._flatten_layers(include_self=False))  # pylint: disable=protected-access
  if [type(l) for l in ours] != [type(l) for l in theirs]:
    return
  for original, copied in zip(ours, theirs):
    if copied.name != original.name:
      copied._name = original.name  # pylint: disable=protected-access
