"""Tests for tfplace.graph.graph_io: every file form, every bad input."""

import os

import pytest

import tfplace  # noqa: F401
from tfplace.errors import GraphImportError
from tfplace.graph import graph_io

TESTDATA = os.path.join(os.path.dirname(__file__), "..", "..", "testdata")
MLP = os.path.join(TESTDATA, "mlp_2tower.pbtxt")
MLP_META = os.path.join(TESTDATA, "mlp_2tower_ref.meta.pbtxt")


def test_reads_text_graph_def():
  graph_def, meta = graph_io.read_graph_file(MLP)
  assert meta is None and len(graph_def.node) == 59


def test_reads_text_meta_graph_with_collections():
  graph_def, meta = graph_io.read_graph_file(MLP_META)
  assert meta is not None and len(graph_def.node) == 55
  assert list(meta.collection_def["train_op"].node_list.value) == ["train"]


@pytest.mark.parametrize("source,name", [(MLP, "g.pb"), (MLP, "g.pbtxt"),
                                         (MLP_META, "g.meta"),
                                         (MLP_META, "g.pb"),
                                         (MLP, "g.meta")])
def test_round_trip_any_extension(tmp_path, source, name):
  graph_def, meta = graph_io.read_graph_file(source)
  path = str(tmp_path / name)
  graph_io.write_graph_file(path, meta if meta is not None else graph_def)
  is_text = open(path, "rb").read(4) in (b"node", b"meta", b"grap")
  assert is_text == name.endswith(".pbtxt")
  graph_def2, meta2 = graph_io.read_graph_file(path)
  assert graph_def2 == graph_def and (meta2 is None) == (meta is None)


@pytest.mark.parametrize("content,message", [
    (None, "no such graph file"),
    (b"", "is empty"),
    (b'{"placement": {"a": "/cpu:0"}}', "not a TensorFlow graph"),
    (bytes(range(256)) * 3, "not a TensorFlow graph"),
    (b"node { name: 'a' op: 'Const' ", "not a TensorFlow graph"),
    (b"versions { producer: 1 }", "the graph is empty"),
])
def test_bad_files(tmp_path, content, message):
  path = tmp_path / "bad.pb"
  if content is not None:
    path.write_bytes(content)
  with pytest.raises(GraphImportError, match=message):
    graph_io.read_graph_file(str(path))


def test_truncated_binary_is_rejected(tmp_path):
  graph_def, _ = graph_io.read_graph_file(MLP)
  data = graph_def.SerializeToString()
  path = tmp_path / "cut.pb"
  path.write_bytes(data[:len(data) // 2 + 3])
  with pytest.raises(GraphImportError):
    graph_io.read_graph_file(str(path))


def test_write_replaces_whole_file(tmp_path):
  graph_def, _ = graph_io.read_graph_file(MLP)
  path = str(tmp_path / "out.pbtxt")
  with open(path, "w") as f:
    f.write("old content " * 10000)
  graph_io.write_graph_file(path, graph_def)
  assert graph_io.read_graph_file(path)[0] == graph_def
  assert not [p for p in os.listdir(tmp_path) if p.startswith(".tmp")]
