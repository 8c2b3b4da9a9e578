"""Saved Keras models (.keras, .h5, a SavedModel folder) loaded with tf_keras.

tfplace imports tf_keras (Keras 2) models: `import tfplace` sets
`TF_USE_LEGACY_KERAS=1` before TensorFlow loads. A .keras file saved by
Keras 3 (TensorFlow's default `tf.keras` without that variable) is refused
in one line that says how to save it for tfplace.
"""

import contextlib
import json
import logging as py_logging
import os
import zipfile
from typing import Optional

from tfplace.errors import GraphImportError

KERAS_SUFFIXES = (".keras", ".h5", ".hdf5")


def is_saved_keras_path(path: str) -> bool:
  """Whether `path` names a saved Keras model (a .keras, .h5 or .hdf5 file,
  or a folder: a SavedModel) rather than a graph file."""
  return path.endswith(KERAS_SUFFIXES) or os.path.isdir(path)


def load_saved_model(path: str, needs_loss: bool = False):
  """The tf_keras model saved at `path`, compiled if it was saved compiled
  (a compile state tf_keras cannot rebuild, e.g. a custom loss, is left
  out).

  Raises:
    GraphImportError: no such file, a folder that is not a Keras
      SavedModel, a file tf_keras cannot load, or (`needs_loss`) a model
      saved uncompiled.
  """
  import tf_keras
  if os.path.isdir(path):
    if not os.path.isfile(os.path.join(path, "keras_metadata.pb")):
      raise GraphImportError(
          f"{path}: a folder that is not a SavedModel of a Keras model (no "
          "keras_metadata.pb); a SavedModel's signatures are not a training "
          "step: import its training tf.function in Python")
  elif not os.path.isfile(path):
    raise GraphImportError(f"{path}: no such file")
  _refuse_keras3(path)
  errors = (ValueError, TypeError, OSError, KeyError, AttributeError)
  try:
    with _optimizer_state_not_loaded_quietly():
      model = tf_keras.models.load_model(path)
  except errors:
    try:
      model = tf_keras.models.load_model(path, compile=False)
    except errors as e:
      raise GraphImportError(
          f"{path}: tf_keras cannot load it ({_short(e)}); a model with "
          "custom layers is imported in Python, with "
          "tfplace.import_graph(model, loss=...)") from None
  if needs_loss and not getattr(model, "_is_compiled", False):
    raise GraphImportError(
        f"{path}: the model was saved uncompiled; give its loss (`tfplace "
        "import --loss NAME`, or import_graph(..., loss=))")
  return model


class _DropsOptimizerStateSkip(py_logging.Filter):
  """Drops tf_keras's "Skipping variable loading for optimizer" warning."""

  def filter(self, record: py_logging.LogRecord) -> bool:
    return not str(record.msg).startswith(
        "Skipping variable loading for optimizer")


@contextlib.contextmanager
def _optimizer_state_not_loaded_quietly():
  """While active, tf_keras's warning that a loaded model's optimizer state
  was skipped (its optimizer is not built until it trains) is not logged:
  an imported step starts a fresh optimizer anyway (`_graph_step`), so the
  saved slots never matter to a placement."""
  logger = py_logging.getLogger("absl")
  drop = _DropsOptimizerStateSkip()
  logger.addFilter(drop)
  try:
    yield
  finally:
    logger.removeFilter(drop)


def keras_version(path: str) -> Optional[str]:
  """The Keras version a .keras file was saved by (its metadata.json), or
  None (not a .keras zip, or no version in it)."""
  if not zipfile.is_zipfile(path):
    return None
  try:
    with zipfile.ZipFile(path) as archive:
      metadata = json.loads(archive.read("metadata.json"))
  except (KeyError, ValueError, OSError, zipfile.BadZipFile):
    return None
  version = metadata.get("keras_version") if isinstance(metadata,
                                                        dict) else None
  return str(version) if version else None


def _refuse_keras3(path: str) -> None:
  """GraphImportError for a .keras file saved by Keras 3, which tf_keras
  cannot read (its error is the whole model config, thousands of
  characters)."""
  version = keras_version(path)
  if version and version.split(".")[0] not in ("", "0", "1", "2"):
    raise GraphImportError(
        f"{path}: saved by Keras {version}; tfplace reads tf_keras (Keras 2) "
        "models. Save it again with `import tfplace` before TensorFlow (or "
        "TF_USE_LEGACY_KERAS=1 set), so that tf.keras is tf_keras: "
        "model.save(...) then writes a file tfplace reads")


def _short(error: Exception, limit: int = 300) -> str:
  """An error's first line, at most `limit` characters."""
  text = str(error).strip().splitlines()[0] if str(error).strip() else ""
  return text if len(text) <= limit else text[:limit] + "..."
