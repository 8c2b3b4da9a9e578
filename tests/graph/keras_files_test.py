"""Saved Keras files: one written by Keras 3 is refused in one short line
that says how to save it for tfplace."""

import json
import os
import subprocess
import sys
import zipfile

import pytest

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.errors import GraphImportError
from tfplace.graph import keras_files

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


def _keras_file(path, version):
  """A .keras zip as Keras writes it (metadata, config, weights), with
  a config tf_keras cannot read."""
  with zipfile.ZipFile(path, "w") as archive:
    archive.writestr("metadata.json", json.dumps(
        {"keras_version": version, "date_saved": "2026-11-29@01:05:13"}))
    archive.writestr("config.json", json.dumps(
        {"module": "keras.src.models.functional", "class_name": "Functional",
         "config": {"layers": [{"name": "dense"}] * 200}}))
    archive.writestr("model.weights.h5", b"")
  return str(path)


def test_the_version_is_read_from_the_metadata(tmp_path):
  assert keras_files.keras_version(_keras_file(tmp_path / "m.keras",
                                               "3.15.1")) == "3.15.1"
  (tmp_path / "plain.keras").write_text("not a zip")
  assert keras_files.keras_version(str(tmp_path / "plain.keras")) is None


def test_a_keras3_file_is_refused_saying_how_to_save_it(tmp_path):
  # tf_keras's own error was the whole model config in one line (~5,000
  # characters for a three-layer model).
  path = _keras_file(tmp_path / "m.keras", "3.15.1")
  with pytest.raises(GraphImportError) as e:
    keras_files.load_saved_model(path)
  message = str(e.value)
  assert "saved by Keras 3.15.1" in message and "import tfplace" in message
  assert len(message) < 400


def test_another_unreadable_file_is_named_in_a_short_line(tmp_path):
  path = _keras_file(tmp_path / "m.keras", "2.21.0")
  with pytest.raises(GraphImportError, match="tf_keras cannot load it") as e:
    keras_files.load_saved_model(path)
  assert len(str(e.value)) < 600


def test_place_on_a_keras3_file_exits_2_in_one_line(tmp_path):
  path = _keras_file(tmp_path / "m.keras", "3.15.1")
  proc = subprocess.run(
      [sys.executable, "-m", "tfplace.cli.main", "place", path, "--cluster",
       "k80x2", "--out", str(tmp_path / "p.json")], capture_output=True,
      text=True, timeout=300, cwd=ROOT)
  assert proc.returncode == 2, proc.stderr
  error = proc.stderr.strip().splitlines()[-1]
  assert error.startswith("tfplace place: error: ") and "Keras 3.15.1" in error
  assert not (tmp_path / "p.json").exists()
