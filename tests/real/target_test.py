"""Tests for the checks of a target against the cluster placed on: each
mismatch is one error that says what to give instead."""

import pytest
import tensorflow as tf

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.cost.presets import cpu_cluster, load_cluster
from tfplace.errors import MeasureError
from tfplace.measurement.local_cluster import RemoteCluster
from tfplace.real.target import Target, check_target, resolve_target

SERVERS = RemoteCluster({"worker": ["127.0.0.1:1", "127.0.0.1:2"]})


def test_local_takes_a_cluster_of_this_process():
  check_target(resolve_target("local"), cpu_cluster(2))


def test_local_on_servers_devices_names_the_servers_target():
  with pytest.raises(MeasureError) as e:
    check_target(resolve_target("local"), SERVERS.to_cluster())
  message = str(e.value)
  assert message.startswith("the target 'local' runs the steps in this "
                            "process, on its own devices")
  assert "give them as the target too" in message
  assert "place on the cluster 'local'" in message
  assert "--local_workers" not in message


@pytest.mark.skipif(len(tf.config.list_physical_devices("GPU")) >= 2,
                    reason="this machine has the preset's GPUs")
def test_local_on_gpus_this_machine_lacks_says_so():
  with pytest.raises(MeasureError, match=r"the target 'local' runs the steps "
                     r"in this process.*which cluster 'k80x2' does not fit: "
                     r"GPU:1 is named but TensorFlow sees"):
    check_target(resolve_target("local"), load_cluster("k80x2"))


def test_another_cluster_than_the_servers_is_named_with_the_servers():
  target = Target("grpc://127.0.0.1:1", (),
                  tuple(SERVERS.to_cluster().device_names),
                  "2 TF servers at grpc://127.0.0.1:1")
  from tfplace.real import target as target_lib
  with pytest.raises(MeasureError, match=r"cluster 'cpu2' \(.*\) is not the "
                     r"cluster of the target, 2 TF servers at grpc://"):
    # pylint: disable-next=protected-access
    target_lib._check_devices(target, cpu_cluster(2))


@pytest.fixture(scope="module")
def two_servers():
  from tfplace.measurement.local_cluster import LocalCluster
  with LocalCluster(num_workers=2) as servers:
    yield servers


def _tiny_graph():
  from tfplace.models.registry import build_model
  return build_model("mlp_towers", num_towers=2, hidden=4, batch_size=2,
                     input_size=4, num_layers=1)


@pytest.mark.parametrize("form", [dict, RemoteCluster])
def test_a_spec_in_another_order_than_the_servers_is_refused(two_servers,
                                                             form):
  # Only the CLI asked the servers: verify_top_k(graph, swapped spec) ran,
  # and measured each placement on the other task than it named.
  from tfplace.real.target import checked_problem
  swapped = two_servers.cluster_spec["worker"][::-1]
  with pytest.raises(MeasureError, match=(
      f"the cluster spec lists {swapped[0]} as /job:worker/task:0, but the "
      r"server there is /job:worker/task:1 of its own cluster")):
    checked_problem(_tiny_graph(), form({"worker": swapped}))


def test_a_spec_asks_each_server_once_and_a_local_cluster_none(
    two_servers, monkeypatch):
  from tfplace.measurement import server_tasks
  from tfplace.real.target import checked_problem
  asked = []
  real = server_tasks.served_task
  monkeypatch.setattr(server_tasks, "served_task",
                      lambda address, *a: asked.append(address) or real(
                          address, *a))
  _, resolved = checked_problem(_tiny_graph(), dict(two_servers.cluster_spec))
  assert asked == two_servers.cluster_spec["worker"]
  assert resolved.workers == tuple(two_servers.cluster_spec["worker"])
  checked_problem(_tiny_graph(), two_servers)
  assert len(asked) == 2
