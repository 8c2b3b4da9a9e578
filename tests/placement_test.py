"""Tests for Placement: validation, the JSON format, arrays, GraphDef."""

import json

import numpy as np
import pytest

import tfplace  # noqa: F401
from tfplace.cost.cluster import Cluster, Device
from tfplace.errors import PlacementError
from tfplace.graph.op_graph import Edge, Op, OpGraph
from tfplace.placement import Placement

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
GPU1 = "/job:localhost/replica:0/task:0/device:GPU:1"


@pytest.fixture
def graph():
  from tensorflow.core.framework import graph_pb2
  graph_def = graph_pb2.GraphDef()
  for name in ("v", "read", "cpu_only"):
    graph_def.node.add(name=name, op="NoOp")
  ops = [Op("v", "VarHandleOp", kernels=frozenset({"CPU", "GPU"})),
         Op("read", "ReadVariableOp", kernels=frozenset({"CPU", "GPU"})),
         Op("cpu_only", "PyFunc", kernels=frozenset({"CPU"}))]
  return OpGraph(ops, [Edge(0, 1, 0, 8), Edge(1, 2, 0, 4)], graph_def,
                 name="g", colocation_groups=np.array([0, 0, 1]))


@pytest.fixture
def cluster():
  return Cluster("c", tuple(Device(n, "", 1e12, 1e11, 1e9)
                            for n in ("/cpu:0", "/gpu:0", "/gpu:1")))


def test_partial_device_strings_are_stored_in_full(graph, cluster):
  p = Placement({"v": "/gpu:1", "read": "/device:GPU:1", "cpu_only": "/cpu:0"})
  assert p.devices == {"v": GPU1, "read": GPU1, "cpu_only": CPU0}
  p.validate(graph, cluster)
  assert p.to_array(graph, cluster).tolist() == [2, 2, 0]


def test_json_round_trip_keeps_placement_and_metadata(graph, cluster, tmp_path):
  p = Placement.from_array(graph, cluster, [1, 1, 0], placer="manual",
                           predicted_step_time_s=0.25)
  path = tmp_path / "p.json"
  p.save(str(path))
  data = json.loads(path.read_text())
  assert data["format"] == "tfplace.placement/1"
  assert data["placement"] == {"v": GPU0, "read": GPU0, "cpu_only": CPU0}
  assert data["metadata"]["graph_fingerprint"] == graph.fingerprint
  assert data["metadata"]["devices"] == [CPU0, GPU0, GPU1]
  assert data["metadata"]["predicted_step_time_s"] == 0.25
  loaded = Placement.load(str(path))
  assert loaded.devices == p.devices
  assert loaded.metadata.placer == "manual"


def test_unknown_metadata_keys_survive_a_round_trip(tmp_path):
  path = tmp_path / "p.json"
  path.write_text(json.dumps({"placement": {"v": "/gpu:0"},
                              "metadata": {"searched_for_s": 12}}))
  p = Placement.load(str(path))
  assert p.metadata.extra == {"searched_for_s": 12}
  assert p.to_dict()["metadata"]["searched_for_s"] == 12


@pytest.mark.parametrize("devices, message", [
    ({"v": "/gpu:0", "read": "/gpu:0"}, "not placed"),
    ({"v": "/gpu:0", "read": "/gpu:0", "cpu_only": "/cpu:0", "ghost": "/cpu:0"},
     "not in graph"),
    ({"v": "/gpu:0", "read": "/gpu:1", "cpu_only": "/cpu:0"}, "split"),
    ({"v": "/gpu:0", "read": "/gpu:0", "cpu_only": "/gpu:0"}, "no GPU kernel"),
    ({"v": "/gpu:7", "read": "/gpu:7", "cpu_only": "/cpu:0"},
     "not a device of cluster"),
])
def test_invalid_placements_say_what_is_wrong(graph, cluster, devices, message):
  with pytest.raises(PlacementError, match=message):
    Placement(devices).validate(graph, cluster)


def test_malformed_device_string_is_rejected():
  with pytest.raises(PlacementError, match="malformed device string"):
    Placement({"v": "GPU zero"})


@pytest.mark.parametrize("text, message", [
    ("{not json", "not valid JSON"),
    ('{"placement": ["v"]}', "must be an object"),
])
def test_bad_files_are_rejected(tmp_path, text, message):
  path = tmp_path / "p.json"
  path.write_text(text)
  with pytest.raises(PlacementError, match=message) as e:
    Placement.load(str(path))
  # The file is named: "placement JSON must be an object ..." did not say
  # which (a cluster JSON given as --placement).
  assert str(path) in str(e.value)
  with pytest.raises(PlacementError, match="no such placement file"):
    Placement.load(str(tmp_path / "missing.json"))


def test_to_graph_def_sets_every_node_device(graph):
  p = Placement({"v": "/gpu:1", "read": "/gpu:1", "cpu_only": "/cpu:0"})
  placed = p.to_graph_def(graph)
  assert [n.device for n in placed.node] == [GPU1, GPU1, CPU0]
  assert all(n.device == "" for n in graph.graph_def.node)  # not mutated
