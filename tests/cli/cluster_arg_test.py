"""Tests for the CLI's --cluster argument forms."""

import json

import pytest

import tfplace  # noqa: F401
from tfplace.cli.cluster_arg import load_cluster_arg, read_server_spec
from tfplace.errors import ClusterError

W1 = "/job:worker/replica:0/task:1/device:CPU:0"


def test_state_file_of_cluster_up_is_a_worker_cluster(tmp_path):
  state = tmp_path / "state.json"
  state.write_text(json.dumps({
      "cluster_spec": {"worker": ["127.0.0.1:2000", "127.0.0.1:2001"]},
      "cores_per_worker": 1,
      "profiler_addresses": ["127.0.0.1:3000", "127.0.0.1:3001"]}))
  cluster = load_cluster_arg(str(state))
  assert cluster.num_devices == 2 and cluster.device_names[1] == W1
  spec = read_server_spec(str(state))
  assert spec.profiler_addresses == ["127.0.0.1:3000", "127.0.0.1:3001"]


def test_state_file_names_the_gpus_its_workers_were_given(tmp_path):
  state = tmp_path / "state.json"
  state.write_text(json.dumps({
      "cluster_spec": {"worker": ["127.0.0.1:2000", "127.0.0.1:2001"]},
      "cores_per_worker": 4, "worker_gpus": [[0], []],
      "gpus_per_worker": [1, 0], "gpu_memory_bytes": 141e9}))
  cluster = load_cluster_arg(str(state))
  assert cluster.device_names == [
      "/job:worker/replica:0/task:0/device:CPU:0",
      "/job:worker/replica:0/task:0/device:GPU:0", W1]
  assert cluster.devices[1].memory_bytes == 141e9


def test_inline_cluster_spec_names_its_workers():
  spec = read_server_spec('{"worker": ["10.0.0.1:2222", "10.0.0.2:2222", '
                          '"10.0.0.3:2222"]}')
  assert spec.remote().target == "grpc://10.0.0.1:2222"
  assert spec.remote().to_cluster().num_devices == 3


def test_presets_and_cluster_json_still_load(tmp_path):
  assert load_cluster_arg("k80x2").num_devices == 3
  assert read_server_spec("k80x2") is None
  bad = tmp_path / "bad.json"
  bad.write_text('{"devices": []}')
  with pytest.raises(ClusterError, match="no devices"):
    load_cluster_arg(str(bad))
