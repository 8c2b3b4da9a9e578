"""Tests for tfplace.graph.importers_keras on a tiny tf_keras model."""

from absl import logging
import numpy as np
import pytest

import tfplace  # noqa: F401
import tf_keras

from tfplace.measurement.session import run_training_step
from tfplace.errors import GraphImportError
from tfplace.graph import importers_keras, keras_files
from tfplace.graph.importers import import_graph


def _model(dropout=0.0):
  layers = [tf_keras.layers.Dense(4, activation="relu", input_shape=(3,))]
  if dropout:
    layers.append(tf_keras.layers.Dropout(dropout))
  layers.append(tf_keras.layers.Dense(2, activation="softmax"))
  return tf_keras.Sequential(layers)


def test_keras_step_loss_matches_eager_and_model_still_works():
  model = _model()
  x = np.random.RandomState(1).randn(5, 3).astype(np.float32)
  y = np.array([0, 1, 1, 0, 1])
  g = import_graph(model, loss="sparse_categorical_crossentropy",
                   optimizer=tf_keras.optimizers.SGD(0.1), x=x, y=y)
  assert g.fetches.train_ops == ("train",) and g.fetches.loss == "loss:0"
  # Two kernels and two biases: (3*4 + 4 + 4*2 + 2) floats.
  assert g.param_bytes.sum() >= (12 + 4 + 8 + 2) * 4
  eager = tf_keras.losses.sparse_categorical_crossentropy(y, model(x))
  run = run_training_step(g.graph_def, g.fetches)
  assert run.loss == pytest.approx(float(np.mean(eager)), rel=1e-5)


def test_keras_weights_beyond_the_graph_limit_start_from_initializers(
    monkeypatch, caplog):
  # The limit a GraphDef can carry, lowered: the clone keeps its own
  # initializers instead of the model's weights.
  from tfplace.graph import function_captures
  model = _model()
  # Weights no initializer gives (Keras starts biases at zero): the kept
  # model predicts class 0 with certainty (loss ~6), an initialized clone
  # does not (loss near log 2).
  kernel, _ = model.layers[-1].get_weights()
  model.layers[-1].set_weights([kernel, np.array([5.0, -5.0], np.float32)])
  x = np.random.RandomState(1).randn(5, 3).astype(np.float32)
  y = np.array([0, 1, 1, 0, 1])
  kept = run_training_step(*_step(import_graph(
      model, loss="sparse_categorical_crossentropy", x=x, y=y))).loss
  monkeypatch.setattr(function_captures, "MAX_EMBEDDED_WEIGHT_BYTES", 64)
  g = import_graph(model, loss="sparse_categorical_crossentropy", x=x, y=y)
  assert "starts them from random values" in caplog.text
  loss = run_training_step(*_step(g)).loss
  assert np.isfinite(loss) and loss != pytest.approx(kept, rel=1e-3)


def _step(g):
  return g.graph_def, g.fetches


def test_keras_random_data_and_dropout_are_deterministic():
  g = import_graph(_model(dropout=0.5), loss="mse", optimizer="adam",
                   batch_size=8)
  assert g.op("x").output_shapes == ((8, 3),)
  losses = {run_training_step(g.graph_def, g.fetches).loss for _ in range(2)}
  assert len(losses) == 1


def test_keras_needs_a_loss_and_a_known_optimizer():
  with pytest.raises(GraphImportError, match="needs loss="):
    import_graph(_model())
  with pytest.raises(GraphImportError, match="unknown optimizer.*'adamw'"):
    import_graph(_model(), loss="mse", optimizer="nosuch")
  with pytest.raises(GraphImportError, match="unknown loss 'nosuch'"):
    import_graph(_model(), loss="nosuch")
  with pytest.raises(GraphImportError, match="must be >= 1, got 0"):
    import_graph(_model(), loss="mse", batch_size=0)


@pytest.mark.parametrize("optimizer", ["AdamW", "Lion"])
def test_optimizer_without_a_graph_mode_twin_trains_as_eagerly(optimizer):
  # AdamW and Lion have no legacy twin: the step is traced as a tf.function.
  # The imported step's second loss is the loss after one update: the same
  # as one eager step of the same optimizer on a copy of the model.
  model = _model()
  x = np.random.RandomState(2).randn(6, 3).astype(np.float32)
  y = np.array([0, 1, 1, 0, 1, 0])
  config = {"learning_rate": 0.2, "weight_decay": 0.5}
  opt = getattr(tf_keras.optimizers, optimizer)(**config)
  g = import_graph(model, loss="sparse_categorical_crossentropy",
                   optimizer=opt, x=x, y=y)
  assert any(op.name.startswith(type(opt).__name__) for op in g.ops)
  twice = run_training_step(g.graph_def, g.fetches, steps=2).loss

  def eager_loss(m):
    return float(np.mean(tf_keras.losses.sparse_categorical_crossentropy(
        y, m(x))))

  before = eager_loss(model)
  copy = tf_keras.models.clone_model(model)
  copy.set_weights(model.get_weights())
  eager_opt = type(opt).from_config(opt.get_config())
  import tensorflow as tf
  with tf.GradientTape() as tape:
    loss = tf.reduce_mean(tf_keras.losses.sparse_categorical_crossentropy(
        y, copy(x)))
  eager_opt.apply_gradients(zip(tape.gradient(loss, copy.trainable_variables),
                                copy.trainable_variables))
  assert twice == pytest.approx(eager_loss(copy), rel=1e-4)
  assert abs(twice - before) > 1e-3  # The update moved the loss.
  assert eager_loss(model) == before  # Tracing left the model alone.


class _FirstStepOnly(tf_keras.optimizers.schedules.LearningRateSchedule):
  """A user's own schedule: 0.5 for the first update, then 0."""

  def __call__(self, step):
    import tensorflow as tf
    return tf.where(step < 1, 0.5, 0.0)

  def get_config(self):
    return {}


@pytest.mark.parametrize("optimizer", ["SGD", "AdamW"])
@pytest.mark.parametrize("schedule", ["builtin", "own"])
def test_learning_rate_schedule_is_followed(optimizer, schedule):
  # A schedule used to fail the import ("Failed to convert elements of
  # {'class_name': 'ExponentialDecay', ...} to Tensor"). Its rate is 0.5 for
  # the first update and 0 after, so the loss after two updates is the loss
  # after one update at 0.5 (SGD: graph path; AdamW: traced path).
  model = _model()
  x = np.random.RandomState(3).randn(6, 3).astype(np.float32)
  y = np.array([1, 0, 1, 1, 0, 0])
  rate = (tf_keras.optimizers.schedules.PiecewiseConstantDecay([0], [0.5, 0.0])
          if schedule == "builtin" else _FirstStepOnly())
  cls = getattr(tf_keras.optimizers, optimizer)
  g = import_graph(model, loss="sparse_categorical_crossentropy",
                   optimizer=cls(learning_rate=rate), x=x, y=y)
  after_two = run_training_step(g.graph_def, g.fetches, steps=3).loss
  after_one = run_training_step(g.graph_def, g.fetches, steps=2).loss
  ref = import_graph(model, loss="sparse_categorical_crossentropy",
                     optimizer=cls(learning_rate=0.5), x=x, y=y)
  fixed_one, fixed_two = (
      run_training_step(ref.graph_def, ref.fetches, steps=k).loss
      for k in (2, 3))
  assert after_one == pytest.approx(fixed_one, rel=1e-5)
  assert after_two == pytest.approx(after_one, rel=1e-6)
  assert abs(fixed_two - fixed_one) > 1e-4  # A fixed rate moves it again.


def test_text_vectorization_model_imports_and_trains_as_eagerly():
  # A TextVectorization layer holds a lookup table: the model cannot be
  # cloned into a graph (it failed with "Attempting to capture an
  # EagerTensor"), so its step is traced and the table is imported with it.
  words = np.array(["the cat sat", "a dog ran", "the dog sat", "cat"])
  vectorize = tf_keras.layers.TextVectorization(max_tokens=20,
                                                output_sequence_length=4)
  vectorize.adapt(words)
  inputs = tf_keras.Input((), dtype="string")
  hidden = tf_keras.layers.GlobalAveragePooling1D()(
      tf_keras.layers.Embedding(20, 3)(vectorize(inputs)))
  model = tf_keras.Model(inputs, tf_keras.layers.Dense(2)(hidden))
  model.compile(optimizer="sgd", loss=tf_keras.losses.
                SparseCategoricalCrossentropy(from_logits=True))
  y = np.array([0, 1, 1, 0])
  g = import_graph(model, x=words, y=y)
  assert "LookupTableFindV2" in g.op_types
  eager = float(np.mean(tf_keras.losses.sparse_categorical_crossentropy(
      y, model(words), from_logits=True)))
  run = run_training_step(g.graph_def, g.fetches)
  assert run.loss == pytest.approx(eager, rel=1e-6)
  # Without data: random sentences (they were random floats, which a string
  # input cannot take).
  g = import_graph(model, batch_size=3)
  assert g.op("x").output_dtypes == ("string",)
  assert g.op("x").output_shapes == ((3,),)
  assert np.isfinite(run_training_step(g.graph_def, g.fetches).loss)


class _ClippedModel(tf_keras.Model):
  """A model with its own train_step."""

  def train_step(self, data):
    return super().train_step(data)


def test_own_train_step_is_warned_about(caplog):
  inputs = tf_keras.Input((3,))
  model = _ClippedModel(inputs, tf_keras.layers.Dense(2)(inputs))
  import_graph(model, loss="mse", batch_size=2)
  assert "overrides train_step" in caplog.text
  assert "import_fit_step" in caplog.text
  caplog.clear()
  import_graph(_model(), loss="mse", batch_size=2)
  assert "overrides train_step" not in caplog.text


@pytest.mark.parametrize("name", ["adamw", "Lion", "adafactor"])
def test_optimizer_without_a_graph_mode_twin_by_name(name):
  g = import_graph(_model(), loss="mse", optimizer=name, batch_size=4)
  assert any(op.name.lower().startswith(name.lower()) for op in g.ops)
  assert np.isfinite(run_training_step(g.graph_def, g.fetches).loss)


class _MySGD(tf_keras.optimizers.SGD):
  """A user's own optimizer class (no legacy twin: traced)."""


class _MyLegacySGD(tf_keras.optimizers.legacy.SGD):
  """A user's own graph-mode optimizer class (built in the graph)."""


def test_your_own_optimizer_class_of_either_kind_trains_as_its_base():
  model = _model()
  losses = {}
  for cls in (tf_keras.optimizers.SGD, _MySGD, _MyLegacySGD):
    g = import_graph(model, loss="mse", optimizer=cls(0.5), batch_size=4)
    losses[cls] = run_training_step(g.graph_def, g.fetches, steps=2).loss
  assert losses[_MySGD] == pytest.approx(losses[tf_keras.optimizers.SGD],
                                         rel=1e-5)
  assert losses[_MyLegacySGD] == pytest.approx(
      losses[tf_keras.optimizers.SGD], rel=1e-5)


def test_a_compiled_model_brings_its_loss_and_optimizer():
  model = _model()
  model.compile(optimizer=tf_keras.optimizers.Adam(0.1), loss="mse")
  g = import_graph(model, batch_size=4)
  assert any(op.type == "ResourceApplyAdam" for op in g.ops)
  assert any(op.type == "SquaredDifference" for op in g.ops)
  g = import_graph(model, loss="sparse_categorical_crossentropy",
                   optimizer="sgd", batch_size=4)  # Given: these win.
  assert not any(op.type == "ResourceApplyAdam" for op in g.ops)
  assert not any(op.type == "SquaredDifference" for op in g.ops)
  with pytest.raises(GraphImportError, match="compiled with a loss"):
    import_graph(_model(), batch_size=4)


def test_a_saved_model_is_imported_by_its_path(tmp_path):
  model = _model()
  model.compile(optimizer=tf_keras.optimizers.Adam(0.1), loss="mse")
  model.save(str(tmp_path / "net.keras"))
  g = import_graph(str(tmp_path / "net.keras"), batch_size=4)
  assert g.name == "net"
  assert any(op.type == "ResourceApplyAdam" for op in g.ops)
  _model().save(str(tmp_path / "plain.keras"))
  with pytest.raises(GraphImportError, match="saved uncompiled"):
    import_graph(str(tmp_path / "plain.keras"))
  g = import_graph(str(tmp_path / "plain.keras"), loss="mse", batch_size=4)
  assert np.isfinite(run_training_step(g.graph_def, g.fetches).loss)
  with pytest.raises(GraphImportError, match="no such file"):
    import_graph(str(tmp_path / "missing.h5"))


def test_a_saved_models_unbuilt_optimizer_state_is_not_warned_of(tmp_path,
                                                                caplog):
  model = _model()
  model.compile(optimizer=tf_keras.optimizers.Adam(0.1), loss="mse")
  model.save(str(tmp_path / "net.keras"))  # Its optimizer never built.
  with caplog.at_level("WARNING"):
    g = import_graph(str(tmp_path / "net.keras"), batch_size=4)
  assert any(op.type == "ResourceApplyAdam" for op in g.ops)
  assert not [r for r in caplog.records
              if "Skipping variable loading" in r.getMessage()]
  caplog.clear()
  with keras_files._optimizer_state_not_loaded_quietly():
    logging.warning("Skipping variable loading for optimizer 'Adam'")
    logging.warning("Skipping something else")  # Only that line dropped.
  assert [r.getMessage() for r in caplog.records] == [
      "Skipping something else"]


def test_functional_conv_batchnorm_model_runs_with_its_updates():
  inputs = tf_keras.Input((6, 6, 2))
  h = tf_keras.layers.Conv2D(3, 3, activation="relu")(inputs)
  h = tf_keras.layers.BatchNormalization()(h)
  h = tf_keras.layers.Flatten()(tf_keras.layers.MaxPooling2D()(h))
  model = tf_keras.Model(inputs, tf_keras.layers.Dense(4, "softmax")(h))
  g = import_graph(model, loss="categorical_crossentropy",
                   optimizer=tf_keras.optimizers.RMSprop(0.01), batch_size=2)
  # Conv2D on the batch of 2: 2x4x4x3 outputs, each 3*3*2 multiply-adds.
  conv = [op for op in g.ops if op.type == "Conv2D"
          and op.output_shapes[0][0] == 2]
  assert len(conv) == 1 and conv[0].flops == 2 * (2 * 4 * 4 * 3) * 18
  assert "Conv2DBackpropFilter" in g.op_types
  # The moving-average updates of the training call run in the step.
  assert any("AssignMovingAvg" in op.name for op in g.ops)
  assert run_training_step(g.graph_def, g.fetches, steps=2).loss > 0


@pytest.mark.parametrize("loss, label_shape, label_dtype", [
    (tf_keras.losses.SparseCategoricalCrossentropy(), (8,), "int32"),
    ("sparse_categorical_crossentropy", (8,), "int32"),
    (tf_keras.losses.CategoricalCrossentropy(), (8, 2), "float32"),
    (tf_keras.losses.MeanSquaredError(), (8, 2), "float32"),
])
def test_random_labels_fit_the_loss_in_either_form(loss, label_shape,
                                                   label_dtype):
  g = import_graph(_model(), loss=loss, optimizer="sgd", batch_size=8)
  assert g.op("y").output_shapes == (label_shape,)
  assert g.op("y").output_dtypes == (label_dtype,)
  assert np.isfinite(run_training_step(g.graph_def, g.fetches).loss)


def _two_in_two_out():
  tokens = tf_keras.Input((5,), dtype="int32", name="tokens")
  image = tf_keras.Input((4, 4, 2), name="image")
  e = tf_keras.layers.GlobalAveragePooling1D()(
      tf_keras.layers.Embedding(50, 3)(tokens))
  c = tf_keras.layers.Flatten()(tf_keras.layers.Conv2D(2, 3)(image))
  h = tf_keras.layers.Concatenate()([e, c])
  return tf_keras.Model(
      [tokens, image], [tf_keras.layers.Dense(3, name="cls")(h),
                        tf_keras.layers.Dense(1, name="score")(h)])


def test_several_inputs_and_outputs_random_data_fit_each_one():
  g = import_graph(_two_in_two_out(), optimizer="adam", batch_size=6,
                   loss={"cls": tf_keras.losses.SparseCategoricalCrossentropy(
                       from_logits=True), "score": "mse"})
  assert g.op("x_0").output_shapes == ((6, 5),)
  assert g.op("x_0").output_dtypes == ("int32",)
  assert g.op("x_1").output_shapes == ((6, 4, 4, 2),)
  assert g.op("y_0").output_shapes == ((6,),)
  assert g.op("y_0").output_dtypes == ("int32",)
  assert g.op("y_1").output_shapes == ((6, 1),)
  assert "ResourceGather" in g.op_types and "Conv2D" in g.op_types
  assert np.isfinite(run_training_step(g.graph_def, g.fetches).loss)


def test_several_outputs_sum_their_losses_as_compile_does():
  model = _two_in_two_out()
  rng = np.random.RandomState(3)
  x = {"image": rng.randn(4, 4, 4, 2).astype(np.float32),
       "tokens": rng.randint(0, 50, size=(4, 5)).astype(np.int32)}
  y = [np.array([0, 2, 1, 1]), rng.randn(4, 1).astype(np.float32)]
  losses = ["sparse_categorical_crossentropy", "mae"]
  g = import_graph(model, loss=losses, optimizer="sgd", x=x, y=y)
  cls, score = model([x["tokens"], x["image"]])
  eager = (np.mean(tf_keras.losses.sparse_categorical_crossentropy(
      y[0], cls)) + np.mean(tf_keras.losses.mae(y[1], score)))
  run = run_training_step(g.graph_def, g.fetches)
  assert run.loss == pytest.approx(float(eager), rel=1e-5)


@pytest.mark.parametrize("kwargs, message", [
    (dict(loss=["mse"]), "1 losses for a model with 2 outputs"),
    (dict(loss={"cls": "mse"}), r"missing \['score'\]"),
    (dict(loss="mse", x={"tokens": np.zeros((2, 5), np.int32)}),
     r"missing \['image'\]"),
    (dict(loss="mse", y=[np.zeros((2, 3))]), "1 arrays for a model with 2 "
     "outputs"),
])
def test_several_inputs_or_outputs_bad_data_or_losses_are_named(kwargs,
                                                                message):
  with pytest.raises(GraphImportError, match=message):
    import_graph(_two_in_two_out(), optimizer="sgd", **kwargs)


class _Subclassed(tf_keras.Model):
  """Two inputs in a dict, batch norm (state updates) and an added loss."""

  def __init__(self):
    super().__init__()
    self.dense = tf_keras.layers.Dense(6, activation="relu")
    self.norm = tf_keras.layers.BatchNormalization()
    self.out = tf_keras.layers.Dense(3)

  def call(self, inputs, training=False):
    h = self.dense(tf_keras.layers.concatenate([inputs["a"], inputs["b"]]))
    h = self.norm(h, training=training)
    self.add_loss(0.01 * tf_keras.backend.sum(tf_keras.backend.square(h)))
    return self.out(h)


def _subclassed():
  model = _Subclassed()
  model({"a": np.zeros((2, 4), np.float32), "b": np.zeros((2, 2), np.float32)})
  return model


def test_subclassed_model_step_matches_eager_and_leaves_the_model_alone():
  model = _subclassed()
  rng = np.random.RandomState(4)
  x = {"a": rng.randn(5, 4).astype(np.float32),
       "b": rng.randn(5, 2).astype(np.float32)}
  y = np.array([0, 2, 1, 1, 0])
  before = [w.copy() for w in model.get_weights()]
  g = import_graph(model, loss="sparse_categorical_crossentropy",
                   optimizer=tf_keras.optimizers.Adam(0.01), x=x, y=y)
  assert g.op("x_0").output_shapes == ((5, 4),)
  assert g.op("y").output_shapes == ((5,),)
  assert any("AssignMovingAvg" in op.name for op in g.ops)
  pred = model(x, training=True)
  eager = (np.mean(tf_keras.losses.sparse_categorical_crossentropy(y, pred))
           + float(sum(model.losses)))
  run = run_training_step(g.graph_def, g.fetches)
  assert run.loss == pytest.approx(float(eager), rel=1e-4)
  # model(x, training=True) above moved the batch-norm statistics only.
  after = model.get_weights()
  assert all(np.array_equal(a, b) for a, b in zip(before[:2], after[:2]))


def test_subclassed_model_random_data_takes_the_built_shapes():
  g = import_graph(_subclassed(), loss="mse", optimizer="sgd", batch_size=7)
  assert g.op("x_0").output_shapes == ((7, 4),)
  assert g.op("x_1").output_shapes == ((7, 2),)
  assert g.op("y").output_shapes == ((7, 3),)
  assert np.isfinite(run_training_step(g.graph_def, g.fetches).loss)


def test_subclassed_model_never_called_needs_data():
  with pytest.raises(GraphImportError, match="not built"):
    import_graph(_Subclassed(), loss="mse")


def test_mixed_precision_with_a_loss_scale_optimizer_in_either_form():
  tf_keras.mixed_precision.set_global_policy("mixed_float16")
  try:
    functional = _model()
    subclassed = _subclassed()
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")
  for model in (functional, subclassed):
    opt = tf_keras.mixed_precision.LossScaleOptimizer(
        tf_keras.optimizers.Adam(0.01))
    g = import_graph(model, loss="mse", optimizer=opt, batch_size=4)
    # The optimizer's own step: the update runs in a cond on finite
    # gradients (an If, costed as its branch); the half-precision matmuls
    # are costed.
    assert any(op.type == "MatMul" and op.output_dtypes == ("float16",)
               for op in g.ops)
    assert any(op.type in ("If", "StatelessIf") for op in g.ops)
    assert np.isfinite(run_training_step(g.graph_def, g.fetches).loss)


@pytest.mark.parametrize("name", ["step.meta", "step.meta.pbtxt", "step.pb"])
def test_an_imported_step_saves_to_a_file_every_verb_reads(tmp_path, name):
  model = _model()
  model.compile(optimizer=tf_keras.optimizers.Adam(0.1), loss="mse")
  g = import_graph(model, batch_size=4)
  g.save(str(tmp_path / name))
  back = import_graph(str(tmp_path / name))
  assert back.fingerprint == g.fingerprint
  if name.startswith("step.meta"):  # The step's collections come along.
    assert back.fetches == g.fetches
    assert np.isfinite(run_training_step(back.graph_def, back.fetches).loss)
