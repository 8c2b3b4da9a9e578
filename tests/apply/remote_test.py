"""tfplace.apply on a 2-worker LocalCluster: Keras fit and a custom step."""

import pytest

import tfplace  # noqa: F401
from children import check_training, run_child
from tfplace.apply.remote import cluster_spec_of, connect
from tfplace.errors import ClusterError
from tfplace.measurement.local_cluster import free_ports

WORKERS = ["/job:worker/replica:0/task:0/device:CPU:0",
           "/job:worker/replica:0/task:1/device:CPU:0"]


def test_keras_fit_and_custom_step_on_two_workers():
  result = run_child("cluster")
  assert result["devices"] == WORKERS
  check_training(result["keras"], WORKERS)
  check_training(result["function"], WORKERS)


def test_cluster_specs():
  spec = {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}
  assert cluster_spec_of(spec) == spec
  with pytest.raises(ClusterError, match="host:port"):
    cluster_spec_of({"worker": ["nohost"]})
  with pytest.raises(ClusterError, match="localhost"):
    cluster_spec_of({"localhost": ["127.0.0.1:1"]})


def test_unreachable_server_is_a_clear_error():
  port = free_ports(1)[0]
  with pytest.raises(ClusterError, match=f"127.0.0.1:{port} is not "
                     "reachable"):
    connect({"worker": [f"127.0.0.1:{port}"]}, timeout_s=0.2)
