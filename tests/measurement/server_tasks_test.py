"""Tests for tfplace.measurement.server_tasks on real TF server processes."""

import pytest

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.errors import MeasureError
from tfplace.measurement.local_cluster import LocalCluster
from tfplace.measurement.server_tasks import check_served_tasks, served_task


@pytest.fixture(scope="module")
def addresses():
  with LocalCluster(num_workers=2) as servers:
    yield servers.cluster_spec["worker"]


def test_each_server_names_its_own_task(addresses):
  for task, address in enumerate(addresses):
    own, listed = served_task(address)
    assert own == ("worker", task)
    assert listed == {("worker", 0), ("worker", 1)}


def test_the_servers_own_spec_passes_under_another_host_name(addresses):
  check_served_tasks(addresses)
  check_served_tasks(["grpc://" + a.replace("127.0.0.1", "localhost")
                      for a in addresses])


def test_a_swapped_spec_names_the_address_and_the_task_it_serves(addresses):
  with pytest.raises(MeasureError, match=(
      f"lists {addresses[1]} as /job:worker/task:0, but the server there "
      r"is /job:worker/task:1 of its own cluster")):
    check_served_tasks(addresses[::-1])


def test_a_spec_of_some_of_the_servers_says_how_many_there_are(addresses):
  with pytest.raises(MeasureError, match=(
      r"lists 1 /job:worker task\(s\), but the server at .* is in a "
      "cluster of 2")):
    check_served_tasks(addresses[:1])


def _one_task_placement(graph, task):
  from tfplace.placement import Placement
  return Placement({op.name: f"/job:worker/replica:0/task:{task}/device:CPU:0"
                    for op in graph.ops})


def test_measure_asks_the_servers_of_a_workers_list_it_was_given(addresses):
  # `tfplace.measure` with the caller's own worker list (no LocalCluster's,
  # no cluster spec file): swapped, the health checks and profiles would
  # name each server by the other's task.
  from tfplace.measurement.config import MeasureConfig
  from tfplace.measurement.runner import measure
  from tfplace.models.registry import build_model
  graph = build_model("mlp_towers", num_towers=2, hidden=8, batch_size=4,
                      input_size=8, num_layers=1)
  target = "grpc://" + addresses[0]
  swapped = MeasureConfig(target=target, workers=tuple(addresses[::-1]),
                          warmup=1, steps=1)
  with pytest.raises(MeasureError, match=(
      f"MeasureConfig.workers lists {addresses[1]} as /job:worker/task:0, "
      "but the server there is /job:worker/task:1 of its own cluster; list "
      "the servers' addresses in their own spec's order")):
    measure(graph, _one_task_placement(graph, 1), swapped)
  renamed = tuple(a.replace("127.0.0.1", "localhost") for a in addresses)
  timing = measure(graph, _one_task_placement(graph, 1), MeasureConfig(
      target=target, workers=renamed, warmup=1, steps=1))
  assert timing.devices_match


def test_step_messages_asks_the_servers_of_a_workers_list_too(addresses):
  from tfplace.measurement.config import MeasureConfig
  from tfplace.measurement.partition_messages import step_messages
  from tfplace.models.registry import build_model
  graph = build_model("mlp_towers", num_towers=2, hidden=8, batch_size=4,
                      input_size=8, num_layers=1)
  swapped = MeasureConfig(target="grpc://" + addresses[0],
                          workers=tuple(addresses[::-1]), warmup=1, steps=1)
  with pytest.raises(MeasureError, match=(
      f"MeasureConfig.workers lists {addresses[1]} as /job:worker/task:0")):
    step_messages(graph, _one_task_placement(graph, 1), swapped)
