"""The benchmark models by name: build a tf.Graph or an OpGraph.

    graph = build_model("rnnlm")                       # the paper's sizes
    tiny = build_model("nmt", hidden=8, src_len=3, tgt_len=3)
    built = build_tf_graph("mlp_towers", num_towers=2)  # a tf.Graph to run

Models: ``rnnlm``, ``nmt``, ``inception_v3`` (Mirhoseini et al., ICML 2017),
the small test graphs ``mlp_towers``, ``chain_mlp``, ``small_cnn``, the
held-out fidelity graphs ``resnet_like``, ``transformer``, ``random_dag``,
the Keras-built ``mobilenet_v2``, ``keras_lstm`` and ``keras_transformer``
(`tfplace.models.keras_models`), and the calibration suite's
``calib_conv``, ``calib_depthwise``, ``calib_attention``, ``calib_matmul``,
``calib_embedding``,
``calib_elementwise``, ``calib_loop`` (`tfplace.models.calibration_suite`).
"""

import dataclasses
from typing import Any, Callable, Dict, List, Tuple

from absl import logging

from tfplace.errors import GraphImportError
from tfplace.models import calibration_suite
from tfplace.models import inception_v3
from tfplace.models import keras_models
from tfplace.models import nmt
from tfplace.models import random_dag
from tfplace.models import resnet_like
from tfplace.models import rnnlm
from tfplace.models import small
from tfplace.models import transformer
from tfplace.models.common import BuiltGraph

__all__ = ["BuiltGraph", "MODELS", "build_model", "build_tf_graph",
           "list_models", "make_config"]

MODELS: Dict[str, Tuple[type, Callable[[Any], BuiltGraph]]] = {
    "rnnlm": (rnnlm.RnnlmConfig, rnnlm.build),
    "nmt": (nmt.NmtConfig, nmt.build),
    "inception_v3": (inception_v3.InceptionV3Config, inception_v3.build),
    "mlp_towers": (small.MlpTowersConfig, small.build_mlp_towers),
    "chain_mlp": (small.ChainMlpConfig, small.build_chain_mlp),
    "small_cnn": (small.SmallCnnConfig, small.build_small_cnn),
    "resnet_like": (resnet_like.ResnetLikeConfig, resnet_like.build),
    "transformer": (transformer.TransformerConfig, transformer.build),
    "random_dag": (random_dag.RandomDagConfig, random_dag.build),
    "mobilenet_v2": (keras_models.MobileNetV2Config,
                     keras_models.build_mobilenet_v2),
    "keras_lstm": (keras_models.KerasLstmConfig,
                   keras_models.build_keras_lstm),
    "keras_transformer": (keras_models.KerasTransformerConfig,
                          keras_models.build_keras_transformer),
    "calib_conv": (calibration_suite.CalibConvConfig,
                   calibration_suite.build_conv),
    "calib_depthwise": (calibration_suite.CalibDepthwiseConfig,
                        calibration_suite.build_depthwise),
    "calib_attention": (calibration_suite.CalibAttentionConfig,
                        calibration_suite.build_attention),
    "calib_matmul": (calibration_suite.CalibMatmulConfig,
                     calibration_suite.build_matmul),
    "calib_embedding": (calibration_suite.CalibEmbeddingConfig,
                        calibration_suite.build_embedding),
    "calib_elementwise": (calibration_suite.CalibElementwiseConfig,
                          calibration_suite.build_elementwise),
    "calib_loop": (calibration_suite.CalibLoopConfig,
                   calibration_suite.build_loop),
}


def list_models() -> List[str]:
  """The names `build_model` accepts, sorted."""
  return sorted(MODELS)


def make_config(name: str, **overrides) -> Any:
  """The model's default config with `overrides` applied.

  Raises:
    GraphImportError: unknown model or config field.
  """
  if name not in MODELS:
    raise GraphImportError(
        f"unknown model {name!r}; choose one of {list_models()}")
  config_cls = MODELS[name][0]
  fields = {f.name for f in dataclasses.fields(config_cls)}
  unknown = sorted(set(overrides) - fields)
  if unknown:
    raise GraphImportError(
        f"model {name!r} has no config field(s) {unknown}; "
        f"its fields are {sorted(fields)}")
  return config_cls(**overrides)


def build_tf_graph(name: str, **overrides) -> BuiltGraph:
  """Builds the named model's training step as a tf.Graph.

  Args:
    name: a model name from `list_models()`.
    **overrides: config fields to change (e.g. ``batch_size=2``).

  Returns:
    The `BuiltGraph` (graph, train op, loss tensor, init op, config).

  Raises:
    GraphImportError: unknown model or config field, or a bad size.
  """
  config = make_config(name, **overrides)
  logging.info("building benchmark model %s", name)
  return MODELS[name][1](config)


def build_model(name: str, **overrides):
  """Builds the named model and imports it as an `OpGraph`.

  Args:
    name: a model name from `list_models()`.
    **overrides: config fields to change.

  Returns:
    The `tfplace.graph.op_graph.OpGraph` of one training step.
  """
  from tfplace.graph import importers  # pylint: disable=g-import-not-at-top
  built = build_tf_graph(name, **overrides)
  return importers.from_tf_graph(
      built.graph, train_ops=[built.train_op], loss=built.loss,
      init_ops=[built.init_op], name=name)
