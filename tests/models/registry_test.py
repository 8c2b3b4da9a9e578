"""Tests for tfplace.models.registry: names, overrides, OpGraph import."""

import tfplace  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TF)
import pytest

from tfplace.errors import GraphImportError
from tfplace.models import registry


def test_list_models():
  assert registry.list_models() == [
      "calib_attention", "calib_conv", "calib_depthwise", "calib_elementwise",
      "calib_embedding", "calib_loop", "calib_matmul",
      "chain_mlp", "inception_v3", "keras_lstm", "keras_transformer",
      "mlp_towers",
      "mobilenet_v2", "nmt", "random_dag", "resnet_like", "rnnlm",
      "small_cnn", "transformer"]


def test_defaults_are_the_paper_sizes():
  rnn = registry.make_config("rnnlm")
  assert (rnn.batch_size, rnn.num_steps, rnn.hidden, rnn.num_layers) == (
      64, 35, 1024, 2)
  nmt = registry.make_config("nmt")
  assert (nmt.batch_size, nmt.hidden, nmt.num_layers) == (64, 1024, 4)
  inc = registry.make_config("inception_v3")
  assert (inc.batch_size, inc.image_size, inc.num_classes) == (32, 299, 1000)


def test_overrides_reach_the_graph():
  built = registry.build_tf_graph("mlp_towers", num_towers=2)
  assert built.config.num_towers == 2
  names = {op.name.split("/")[0] for op in built.graph.get_operations()}
  assert {"tower_0", "tower_1"} <= names and "tower_2" not in names


def test_bad_names_raise_one_clear_error():
  with pytest.raises(GraphImportError, match="unknown model 'resnet'"):
    registry.build_tf_graph("resnet")
  with pytest.raises(GraphImportError, match="no config field.*'hiden'"):
    registry.build_tf_graph("rnnlm", hiden=8)
  with pytest.raises(GraphImportError, match="optimizer"):
    registry.build_tf_graph("chain_mlp", optimizer="lbfgs")


def test_build_model_returns_an_op_graph_with_the_step_fetches():
  built = registry.build_tf_graph("chain_mlp", num_layers=2)
  graph = registry.build_model("chain_mlp", num_layers=2)
  assert graph.num_ops == len(built.graph.get_operations())
  assert graph.name == "chain_mlp"
  assert graph.fetches.train_ops == ("train_op",)
  assert graph.fetches.loss == "loss:0"
  assert graph.fetches.init_ops == ("init",)
  assert graph.op("layer_1/MatMul").type == "MatMul"
