"""End-to-end tests of `tfplace import`, `tfplace info` and `tfplace apply`."""

import json
import os
import subprocess
import sys

import pytest

import tfplace  # noqa: F401
from tfplace.cli import apply_cmd, import_cmd, info_cmd
from tfplace.errors import GraphImportError, PlacementError
from tfplace.graph import graph_io

TESTDATA = os.path.join(os.path.dirname(__file__), "..", "..", "testdata")
MLP = os.path.join(TESTDATA, "mlp_2tower.pbtxt")
MLP_META = os.path.join(TESTDATA, "mlp_2tower_ref.meta.pbtxt")
CPU = "/job:localhost/replica:0/task:0/device:CPU:{}"


def _tfplace(*args):
  return subprocess.run([sys.executable, "-m", "tfplace", *args],
                        capture_output=True, text=True, timeout=120)


def _placement_file(tmp_path, graph, devices):
  path = tmp_path / "placement.json"
  path.write_text(json.dumps({"placement": {
      op.name: devices(i) for i, op in enumerate(graph.ops)}}))
  return str(path)


def test_import_writes_meta_with_collections(tmp_path):
  out = str(tmp_path / "mlp.meta")
  summary = import_cmd.run(MLP, None, out)
  assert summary["num_ops"] == 59
  _, meta = graph_io.read_graph_file(out)
  assert list(meta.collection_def["train_op"].node_list.value) == ["train"]
  assert list(meta.collection_def["losses"].node_list.value) == ["loss:0"]
  out2 = str(tmp_path / "mlp.pb")
  import_cmd.run(MLP, None, out2)
  assert graph_io.read_graph_file(out2)[1] is None


def test_import_needs_exactly_one_source(tmp_path):
  with pytest.raises(GraphImportError, match="exactly one"):
    import_cmd.run(None, None, str(tmp_path / "x.pb"))


def test_info_lists_every_group():
  summary = info_cmd.info(MLP_META)
  groups = summary["colocation_groups"]
  assert summary["num_ops"] == 55 == sum(len(g) for g in groups)
  assert ["tower0/w", "tower0/w/Assign", "tower0/w/read",
          "train/update_tower0/w/ApplyGradientDescent"] in groups


def test_apply_keeps_input_form_and_rejects_split_group(tmp_path):
  from tfplace.graph.importers import import_graph
  g = import_graph(MLP_META)
  good = _placement_file(tmp_path, g,
                         lambda i: CPU.format(int(g.group_of[i]) % 2))
  out = str(tmp_path / "placed.meta.pbtxt")
  report = apply_cmd.apply(MLP_META, good, out)
  graph_def, meta = graph_io.read_graph_file(out)
  assert meta is not None and report["num_ops"] == 55
  assert {n.device for n in graph_def.node} == {CPU.format(0), CPU.format(1)}
  before = open(out, "rb").read()
  split = _placement_file(tmp_path, g, lambda i: CPU.format(i % 2))
  with pytest.raises(PlacementError, match="colocation group"):
    apply_cmd.apply(MLP_META, split, out)
  assert open(out, "rb").read() == before


def test_cli_end_to_end_and_exit_status(tmp_path):
  out = str(tmp_path / "g.pbtxt")
  res = _tfplace("import", MLP, "--out", out, "--json")
  assert res.returncode == 0, res.stderr
  assert json.loads(res.stdout.strip().splitlines()[-1])["num_ops"] == 59
  res = _tfplace("info", out, "--json")
  info = json.loads(res.stdout.strip().splitlines()[-1])
  assert info["num_ops"] == 59 and len(info["colocation_groups"]) == 41
  # A JSON file given as the graph: exit 2, one message, nothing written.
  placement = tmp_path / "p.json"
  placement.write_text(json.dumps({"placement": {"ghost": "/cpu:0"}}))
  res = _tfplace("apply", str(placement), str(placement), "--out",
                 str(tmp_path / "never.pbtxt"))
  assert res.returncode == 2 and "not a TensorFlow graph" in res.stderr
  assert not (tmp_path / "never.pbtxt").exists()
  # An unknown op in the placement: exit 2, the existing output untouched.
  existing = tmp_path / "placed.pbtxt"
  existing.write_text("keep me")
  res = _tfplace("apply", out, str(placement), "--out", str(existing))
  assert res.returncode == 2 and "not in graph" in res.stderr
  assert existing.read_text() == "keep me"
  # The graph itself as --out: refused before reading anything.
  before = open(out, "rb").read()
  res = _tfplace("apply", out, str(placement), "--out", out)
  assert res.returncode == 2 and "is also an input" in res.stderr
  assert open(out, "rb").read() == before


def test_missing_or_empty_graph_file_writes_nothing(tmp_path):
  out = tmp_path / "x.pb"
  with pytest.raises(GraphImportError, match="no such graph file"):
    import_cmd.run(str(tmp_path / "missing.pb"), None, str(out))
  (tmp_path / "empty.pbtxt").write_text("versions { producer: 1 }")
  with pytest.raises(GraphImportError, match="empty"):
    info_cmd.info(str(tmp_path / "empty.pbtxt"))
  assert not out.exists()


def test_import_a_saved_keras_model_then_place_it(tmp_path):
  import tf_keras
  model = tf_keras.Sequential([tf_keras.Input((6,)),
                               tf_keras.layers.Dense(8, activation="relu"),
                               tf_keras.layers.Dense(3)])
  saved = str(tmp_path / "mlp.keras")
  model.save(saved)
  out = str(tmp_path / "mlp.meta")
  no_loss = _tfplace("import", saved, "--out", out)
  assert no_loss.returncode == 2 and "saved uncompiled" in no_loss.stderr
  assert "--loss" in no_loss.stderr
  assert not os.path.exists(out)
  done = _tfplace("import", saved, "--loss", "sparse_categorical_crossentropy",
                  "--optimizer", "adam", "--batch_size", "5", "--out", out,
                  "--json")
  assert done.returncode == 0, done.stderr
  assert json.loads(done.stdout.strip().splitlines()[-1])["name"] == "mlp"
  graph, meta = graph_io.read_graph_file(out)
  x = next(n for n in graph.node if n.name == "x")
  assert [d.size for d in x.attr["value"].tensor.tensor_shape.dim] == [5, 6]
  assert any(n.op == "ResourceApplyAdam" for n in graph.node)
  placed = _tfplace("place", out, "--cluster", "k80x2", "--placer", "m_etf",
                    "--out", str(tmp_path / "p.json"))
  assert placed.returncode == 0, placed.stderr
  broken = tmp_path / "broken.keras"
  broken.write_bytes(b"not a keras file")
  bad = _tfplace("import", str(broken), "--loss", "mse", "--out", out)
  assert bad.returncode == 2 and "cannot load it" in bad.stderr


@pytest.mark.parametrize("file_name", ["mlp.keras", "mlp_saved_model"])
def test_a_compiled_keras_model_brings_its_loss_and_optimizer(tmp_path,
                                                              file_name):
  import tf_keras
  model = tf_keras.Sequential([tf_keras.Input((6,)),
                               tf_keras.layers.Dense(8, activation="relu"),
                               tf_keras.layers.Dense(3)])
  model.compile(optimizer=tf_keras.optimizers.AdamW(0.01),
                loss="sparse_categorical_crossentropy")
  saved = str(tmp_path / file_name)
  model.save(saved)  # No suffix: a SavedModel folder.
  out = str(tmp_path / "mlp.meta")
  import_cmd.run(saved, None, out, batch_size=4)
  graph, _ = graph_io.read_graph_file(out)
  assert any(n.op == "SparseSoftmaxCrossEntropyWithLogits"
             for n in graph.node)
  assert any(n.name.startswith("AdamW/") for n in graph.node)
  import_cmd.run(saved, None, out, optimizer="sgd", batch_size=4)
  graph, _ = graph_io.read_graph_file(out)
  assert not any(n.name.startswith("AdamW/") for n in graph.node)
  if file_name.endswith(".keras"):  # Every verb reads it, as import does.
    placed = _tfplace("place", saved, "--cluster", "k80x2", "--placer",
                      "m_etf", "--out", str(tmp_path / "p.json"))
    assert placed.returncode == 0, placed.stderr
    assert "AdamW/" in (tmp_path / "p.json").read_text()


def test_a_folder_that_is_not_a_keras_saved_model_is_refused(tmp_path):
  (tmp_path / "saved_model.pb").write_bytes(b"")
  with pytest.raises(GraphImportError, match="not a SavedModel of a Keras"):
    import_cmd.run(str(tmp_path), None, str(tmp_path / "g.meta"))
  assert not (tmp_path / "g.meta").exists()
