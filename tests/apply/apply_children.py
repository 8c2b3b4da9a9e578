"""Programs the tests in tests/apply run in a fresh process each.

Logical CPU devices must be configured before TensorFlow initializes, and
`tf.config.experimental_connect_to_cluster` changes the whole process, so each
check runs here as `python apply_children.py NAME` and prints one line
"RESULT <json>"; the tests assert on it. Not a test module itself.
"""

import json
import sys

import numpy as np

import tfplace  # noqa: F401  (TF_USE_LEGACY_KERAS before TensorFlow)
import tensorflow as tf
import tf_keras

from tfplace.placement import Placement

LOCAL = "/job:localhost/replica:0/task:0/device:CPU:{}"
WORKER = "/job:worker/replica:0/task:{}/device:CPU:0"
STEPS = 3


def two_cpus() -> None:
  tf.config.set_logical_device_configuration(
      tf.config.list_physical_devices("CPU")[0],
      [tf.config.LogicalDeviceConfiguration()] * 2)


def alternating(graph, device: str) -> Placement:
  """Colocation groups, in order of their first op, on device 0, 1, 0, ..."""
  order = {}
  for g in graph.group_of:
    order.setdefault(int(g), len(order))
  return Placement({op.name: device.format(order[int(graph.group_of[i])] % 2)
                    for i, op in enumerate(graph.ops)})


def data():
  rng = np.random.RandomState(0)
  return (rng.randn(24, 6).astype(np.float32),
          rng.randn(24, 2).astype(np.float32))


def make_model():
  """Two towers on one input, added: named layers."""
  inputs = tf_keras.Input((6,), name="x")
  towers = []
  for t in range(2):
    h = tf_keras.layers.Dense(8, activation="relu", name=f"t{t}_d0")(inputs)
    towers.append(tf_keras.layers.Dense(2, name=f"t{t}_d1")(h))
  model = tf_keras.Model(inputs, tf_keras.layers.Add(name="sum")(towers),
                         name="towers")
  model.compile(optimizer=tf_keras.optimizers.Adam(0.01), loss="mse")
  return model


def make_attention_model():
  """Self-attention: MultiHeadAttention names its inner softmax and dropout
  layers itself, so a clone would name them afresh."""
  inputs = tf_keras.Input((6,), name="x")
  h = tf_keras.layers.Reshape((3, 2), name="seq")(inputs)
  h = tf_keras.layers.MultiHeadAttention(2, 2, name="attention")(h, h)
  h = tf_keras.layers.Dense(2, name="out")(tf_keras.layers.Flatten()(h))
  model = tf_keras.Model(inputs, h, name="attn")
  model.compile(optimizer=tf_keras.optimizers.Adam(0.01), loss="mse")
  return model


def keras_result(device: str, make=make_model, weighted: bool = False
                 ) -> dict:
  """Three fit steps with and without the placement; devices TF used
  (`weighted`: fit with sample weights)."""
  from tfplace.apply.keras import import_fit_step
  x, y = data()
  model = make()
  weights = np.linspace(0.5, 2.0, len(x)).astype(np.float32)
  sample = (weights[:8],) if weighted else ()
  graph = import_fit_step(model, x[:8], y[:8], *sample)
  placement = alternating(graph, device)
  placement.validate(graph)
  reference = tf_keras.models.clone_model(model)
  reference.set_weights(model.get_weights())
  reference.compile_from_config(model.get_compile_config())
  fit = dict(batch_size=8, epochs=STEPS, steps_per_epoch=1, shuffle=False,
             verbose=0, sample_weight=weights if weighted else None)
  losses = reference.fit(x, y, **fit).history["loss"]
  placed = tfplace.apply(model, placement, args=(x[:8], y[:8]) + sample)
  with tfplace.apply.record_devices() as used:
    placed_losses = placed.fit(x, y, **fit).history["loss"]
  report = placed.train_function.report
  return _result(losses, placed_losses, report, used, placement)


def text_result(device: str) -> dict:
  """Three fit steps of a TextVectorization model with and without the
  placement, its lookup table's group on the second device."""
  from tfplace.apply.keras import import_fit_step
  words = np.array(["the cat sat", "a dog ran", "the dog sat", "cat ran"] * 6)
  y = np.arange(24) % 2
  vectorize = tf_keras.layers.TextVectorization(max_tokens=20,
                                                output_sequence_length=4,
                                                name="vectorize")
  vectorize.adapt(words)
  inputs = tf_keras.Input((), dtype="string")
  hidden = tf_keras.layers.GlobalAveragePooling1D(name="pool")(
      tf_keras.layers.Embedding(20, 3, name="embed")(vectorize(inputs)))
  model = tf_keras.Model(inputs, tf_keras.layers.Dense(2, name="out")(hidden),
                         name="text")
  model.compile(optimizer="sgd", loss=tf_keras.losses.
                SparseCategoricalCrossentropy(from_logits=True))
  graph = import_fit_step(model, words[:8], y[:8])
  table = next(i for i, op in enumerate(graph.ops)
               if op.type == "MutableHashTableV2")
  devices = dict(alternating(graph, device).devices)
  for i, op in enumerate(graph.ops):
    if graph.group_of[i] == graph.group_of[table]:
      devices[op.name] = device.format(1)
  placement = Placement(devices)
  reference = tf_keras.models.clone_model(model)
  reference.set_weights(model.get_weights())
  reference.compile_from_config(model.get_compile_config())
  fit = dict(batch_size=8, epochs=STEPS, steps_per_epoch=1, shuffle=False,
             verbose=0)
  losses = reference.fit(words, y, **fit).history["loss"]
  placed = tfplace.apply(model, placement, args=(words[:8], y[:8]))
  with tfplace.apply.record_devices() as used:
    placed_losses = placed.fit(words, y, **fit).history["loss"]
  result = _result(losses, placed_losses, placed.train_function.report, used,
                   placement)
  result["table_op"] = graph.ops[table].name
  return result


def make_step():
  """A custom train step: two towers, Adam, named variables."""
  tf.random.set_seed(0)
  towers = [(tf.Variable(tf.random.normal([6, 8], seed=2 * t), name=f"a{t}"),
             tf.Variable(tf.random.normal([8, 2], seed=2 * t + 1),
                         name=f"b{t}")) for t in range(2)]
  variables = [v for pair in towers for v in pair]
  opt = tf_keras.optimizers.Adam(0.01)

  @tf.function
  def train_step(x, y):
    with tf.GradientTape() as tape:
      pred = tf.add_n([tf.nn.relu(x @ a) @ b for a, b in towers])
      loss = tf.reduce_mean((pred - y) ** 2)
    opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return loss

  return train_step, opt


def function_result(device: str) -> dict:
  """Three steps of a custom tf.function with and without the placement."""
  from tfplace.apply.importing import import_step
  x, y = data()
  step, opt = make_step()
  graph = import_step(step, args=(x, y), optimizers=[opt])
  placement = alternating(graph, device)
  placement.validate(graph)
  losses = [float(step(x, y)) for _ in range(STEPS)]
  placed = tfplace.apply(make_step, placement, factory=True, args=(x, y))
  with tfplace.apply.record_devices() as used:
    placed_losses = [float(placed(x, y))]
  placed_losses += [float(placed(x, y)) for _ in range(STEPS - 1)]
  return _result(losses, placed_losses, placed.report, used, placement)


def _result(losses, placed_losses, report, used, placement) -> dict:
  match = used.compare(placement, prefix=report.call_prefix)
  return {
      "losses": [float(v) for v in losses],
      "placed_losses": [float(v) for v in placed_losses],
      "trace_ops": report.num_trace_ops, "named_ops": report.named_ops,
      "unnamed_ops": list(report.unnamed_ops),
      "missing_ops": list(report.missing_ops),
      "variables": {v.name: v.device for v in report.variables},
      "variables_placed": {v.name: v.placed_on for v in report.variables},
      "compared": match.compared, "matched": match.matched,
      "mismatches": [list(m) for m in match.mismatches[:10]],
      "devices_used": sorted(set(
          used.devices_by_op(report.call_prefix).values())),
  }


def two_cpu_keras() -> dict:
  two_cpus()
  return keras_result(LOCAL)


def two_cpu_keras_weighted() -> dict:
  two_cpus()
  return keras_result(LOCAL, weighted=True)


def two_cpu_keras_text() -> dict:
  two_cpus()
  return text_result(LOCAL)


def two_cpu_keras_attention() -> dict:
  two_cpus()
  return keras_result(LOCAL, make_attention_model)


def two_cpu_function() -> dict:
  two_cpus()
  return function_result(LOCAL)


def two_cpu_errors() -> dict:
  """The messages of the bad inputs that need two devices."""
  from tfplace.apply.importing import import_step
  two_cpus()
  x, y = data()
  step, opt = make_step()
  graph = import_step(step, args=(x, y), optimizers=[opt])
  placement = alternating(graph, LOCAL)
  errors = {"existing_variables": _error(
      lambda: tfplace.apply(step, placement, args=(x, y)))}
  devices = dict(placement.devices)
  update = next(op.name for op in graph.ops
                if op.type == "AssignSubVariableOp")
  devices[update] = LOCAL.format(1 - int(devices[update][-1]))
  errors["split"] = _error(lambda: tfplace.apply(
      make_step, Placement(devices), factory=True, args=(x, y)))
  other = Placement({f"tower_{i}/MatMul": LOCAL.format(i % 2)
                     for i in range(20)})
  errors["other_model"] = _error(lambda: tfplace.apply(
      make_step, other, factory=True, args=(x, y)))
  errors["other_model_keras"] = _error(lambda: tfplace.apply(
      make_model(), other, args=(x[:8], y[:8])))
  three = Placement({n: LOCAL.format(2) for n in placement.devices})
  errors["missing_device"] = _error(lambda: tfplace.apply(step, three))
  return errors


def _error(fn) -> str:
  try:
    fn()
  except tfplace.errors.TfplaceError as e:
    return f"{type(e).__name__}: {e}"
  return "no error"


def cluster() -> dict:
  """Keras fit and a custom step on a 2-worker LocalCluster."""
  with tfplace.LocalCluster(num_workers=2) as servers:
    devices = tfplace.apply.connect(servers)
    out = {"devices": devices, "keras": keras_result(WORKER),
           "function": function_result(WORKER)}
  return out


CHILDREN = {f.__name__: f for f in (two_cpu_keras, two_cpu_keras_weighted,
                                    two_cpu_keras_attention,
                                    two_cpu_keras_text,
                                    two_cpu_function,
                                    two_cpu_errors, cluster)}

if __name__ == "__main__":
  result = CHILDREN[sys.argv[1]]()
  sys.stdout.write("RESULT " + json.dumps(result) + "\n")
  sys.stdout.flush()
