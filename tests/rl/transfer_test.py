"""GDP's transfer: graph-independent weights saved, loaded, refused."""

import tfplace  # noqa: F401  (before TensorFlow)

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from tf_agents.specs import tensor_spec

from tfplace.errors import PlacementError
from tfplace.rl import transfer
from tfplace.rl.networks.gdp_network import GDPNetwork


def network(num_units, hidden=8):
  obs = {"allowed": tensor_spec.TensorSpec((num_units, 3), tf.bool)}
  act = tensor_spec.BoundedTensorSpec((num_units,), tf.int32, 0, 2)
  features = np.random.default_rng(num_units).normal(size=(num_units, 5))
  return GDPNetwork(obs, act, features.astype(np.float32),
                    np.arange(num_units - 1), np.arange(1, num_units),
                    np.arange(num_units), hidden=hidden, heads=2,
                    segment_length=4)


def test_weights_move_to_a_network_of_another_graph(tmp_path):
  trained = network(5)
  trained.create_variables()
  directory = transfer.save_network(trained, str(tmp_path),
                                    trained.transfer_sizes())
  assert directory == os.path.join(str(tmp_path), "network")
  other = network(9)
  assert transfer.load_network(other, str(tmp_path),
                               other.transfer_sizes()) == directory
  pairs = [(a, b) for a, b in zip(trained.trainable_variables,
                                   other.trainable_variables)
           if a is not trained.output_biases().raw]
  assert len(pairs) == len(trained.trainable_variables) - 1
  assert all(np.array_equal(a.numpy(), b.numpy()) for a, b in pairs)
  fresh = network(9)
  fresh.create_variables()
  kernel = lambda net: net.transferable()["device_logits"].kernel.numpy()
  assert not np.array_equal(kernel(fresh), kernel(other))


def test_other_sizes_or_no_network_are_refused(tmp_path):
  trained = network(5)
  trained.create_variables()
  transfer.save_network(trained, str(tmp_path), trained.transfer_sizes())
  wider = network(5, hidden=16)
  with pytest.raises(PlacementError, match="hidden 8 there, 16 here"):
    transfer.load_network(wider, str(tmp_path), wider.transfer_sizes())
  with pytest.raises(PlacementError, match="holds no trained GDP network"):
    transfer.load_network(wider, str(tmp_path / "nothing"), {})
  sizes = json.loads((tmp_path / "network" / "sizes.json").read_text())
  assert sizes["num_devices"] == 3 and sizes["num_features"] == 5
