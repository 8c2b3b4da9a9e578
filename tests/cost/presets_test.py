"""Cluster presets, load_cluster and malformed cluster JSON."""

import json
import math
import os
import re

import numpy as np
import pytest

import tfplace  # noqa: F401
from tfplace.cost import presets
from tfplace.cost.cluster import Cluster
from tfplace.errors import ClusterError

TESTDATA = os.path.join(os.path.dirname(__file__), "..", "..", "testdata",
                        "clusters")


@pytest.mark.parametrize("name,gpus", [("k80x2", 2), ("k80x4", 4),
                                       ("v100x4_nvlink", 4),
                                       ("h100x8_nvlink", 8), ("2hosts_4gpu", 8)])
def test_presets_have_their_gpus_and_a_cpu(name, gpus):
  c = presets.load_cluster(name)
  assert len(c.devices_of_type("GPU")) == gpus
  assert len(c.devices_of_type("CPU")) >= 1
  assert Cluster.from_dict(json.loads(c.to_json())) == c


@pytest.mark.parametrize("name,half", [("k80x2", 0.0),
                                       ("v100x4_nvlink", 125e12),
                                       ("h100x8_nvlink", 989e12),
                                       ("2hosts_4gpu", 125e12)])
def test_tensor_core_gpus_have_their_half_precision_peak(name, half):
  c = presets.load_cluster(name)
  assert {c.devices[i].half_flops for i in c.devices_of_type("GPU")} == {half}
  assert {c.devices[i].half_flops for i in c.devices_of_type("CPU")} == {0.0}
  text = c.to_json()  # Only where there are tensor cores.
  assert ("half_flops" in text) == (half > 0)


def test_two_hosts_use_the_network_between_hosts():
  c = presets.preset("2hosts_4gpu")
  i = c.device_index["/job:worker/replica:0/task:0/device:GPU:0"]
  j = c.device_index["/job:worker/replica:0/task:0/device:GPU:1"]
  k = c.device_index["/job:worker/replica:0/task:1/device:GPU:0"]
  assert c.link_bandwidth[i, j] == pytest.approx(50e9)
  assert c.link_bandwidth[i, k] == pytest.approx(25e9 / 8)
  assert c.link_bandwidth[k, i] == pytest.approx(25e9 / 8)


def test_local_sees_at_least_one_cpu():
  c = presets.preset("local")
  assert c.devices_of_type("CPU") and c.devices[0].memory_bytes > 0


def test_local_n_has_n_logical_cpus_sharing_the_machine():
  one, two = presets.preset("local:1"), presets.load_cluster("local:2")
  cpus = [two.devices[i] for i in two.devices_of_type("CPU")]
  assert two.name == "local:2" and len(cpus) == 2
  assert [d.name for d in cpus] == [
      "/job:localhost/replica:0/task:0/device:CPU:%d" % i for i in (0, 1)]
  # The machine's figures split between them; its GPUs as `local` has them.
  assert len(one.devices_of_type("CPU")) == 1
  assert len(two.devices_of_type("GPU")) == len(
      presets.preset("local").devices_of_type("GPU"))
  assert cpus[0].peak_flops == pytest.approx(
      one.devices[one.devices_of_type("CPU")[0]].peak_flops / 2)


@pytest.mark.parametrize("name", ["local:0", "local:", "local:two"])
def test_local_n_needs_a_count(name):
  with pytest.raises(ClusterError, match="local:N takes a number of logical "
                     "CPUs N >= 1"):
    presets.load_cluster(name)


def test_list_presets():
  assert {"k80x2", "k80x4", "v100x4_nvlink", "h100x8_nvlink", "2hosts_4gpu",
          "local"} <= set(presets.list_presets())


def test_cpu_cluster():
  c = presets.cpu_cluster(3, latency_s=0.5, bandwidth=100.0)
  assert c.num_devices == 3 and c.transfer_time(0, 2, 1000) == pytest.approx(10.5)


def test_load_cluster_from_file():
  c = presets.load_cluster(os.path.join(TESTDATA, "two_cpus.json"))
  assert c.name == "two_cpus" and c.devices[0].slots == 2
  assert c.transfer_time(1, 0, 1000) == pytest.approx(10.5)


def test_unknown_name_lists_presets():
  with pytest.raises(ClusterError, match="k80x2"):
    presets.load_cluster("no_such_cluster")


def test_a_missing_cluster_file_is_named_missing(tmp_path):
  # After `tfplace cluster down` removed the state file, it said "neither
  # a cluster preset nor a cluster JSON file".
  with pytest.raises(ClusterError, match="no such cluster file .*cluster down"):
    presets.load_cluster(str(tmp_path / "cluster.json"))


def _write(tmp_path, data):
  path = tmp_path / "c.json"
  path.write_text(data if isinstance(data, str) else json.dumps(data))
  return str(path)


def _device(**changes):
  d = {"name": "/device:CPU:0", "type": "CPU", "peak_flops": 1e9,
       "memory_bandwidth": 1e9, "memory_bytes": 1e9}
  d.update(changes)
  return d


@pytest.mark.parametrize("data", [
    "{not json",
    [1, 2],
    {"name": "x"},
    {"devices": []},
    {"devices": [_device(peak_flops=0)]},
    {"devices": [_device(peak_flops=-1e9)]},
    {"devices": [_device(memory_bandwidth=math.nan)]},
    {"devices": [_device(memory_bytes="lots")]},
    {"devices": [_device(slots=0)]},
    {"devices": [_device(color="red")]},
    {"devices": [_device(name="GPU0")]},
    {"devices": [_device()], "default_link": {"latency_s": 0, "bandwidth": 0}},
    {"devices": [_device()],
     "default_link": {"latency_s": 0, "bandwidth": math.nan}},
    {"devices": [_device(), _device(name="/device:CPU:1")],
     "links": [{"src": "/device:CPU:0", "dst": "/device:CPU:1",
                "latency_s": 1e-5, "bandwidth": -5}]},
    {"devices": [_device()],
     "links": [{"src": "/device:CPU:0", "dst": "/device:CPU:7",
                "latency_s": 1e-5, "bandwidth": 1e9}]},
])
def test_malformed_cluster_json_raises(tmp_path, data):
  with pytest.raises(ClusterError):
    presets.load_cluster(_write(tmp_path, data))


def test_link_matrices_from_file():
  c = presets.load_cluster(os.path.join(TESTDATA, "cpu_gpu.json"))
  np.testing.assert_allclose(c.link_latency, [[0, 1e-5], [1e-5, 0]])


def test_a_device_without_its_figures_names_the_missing_keys(tmp_path):
  data = {"devices": [{"name": "/device:CPU:0", "type": "CPU"}]}
  with pytest.raises(ClusterError, match="lacks the keys \\['peak_flops', "
                     "'memory_bandwidth', 'memory_bytes'\\]"):
    presets.load_cluster(_write(tmp_path, data))


@pytest.mark.parametrize("devices, words", [
    # The type was dropped silently: a "GPU" named CPU:0 was costed as a CPU.
    ([_device(type="GPU")], "type 'GPU' does not match its name, a CPU"),
    ([_device(type="TPU")], "type 'TPU' does not match its name, a CPU"),
    ([_device(), _device()], "lists a device twice: "
     "/job:localhost/replica:0/task:0/device:CPU:0")])
def test_a_device_type_against_its_name_and_a_repeated_device_are_named(
    tmp_path, devices, words):
  with pytest.raises(ClusterError, match=re.escape(words)):
    presets.load_cluster(_write(tmp_path, {"devices": devices}))
  assert presets.load_cluster(_write(tmp_path, {"devices": [
      _device(type="cpu")]})).devices[0].type == "CPU"
