"""GDP's transfer: a trained policy's graph-independent weights, reused.

GDP (Zhou et al., 2019) trains one policy and places graphs it never saw,
at once (zero-shot) or after a short fine-tune. The GDP network's weights do
not depend on the graph (GraphSAGE, the attention, the superposition gate,
the device logits: everything but the per-unit bias; its features use one
op-type vocabulary for every graph). A `gdp` search with a logdir writes
them at its end to `<logdir>/network/` (a TF checkpoint and the sizes it
needs, `sizes.json`), and a later search reads them before it starts
(`pretrained=<that logdir>`): on another graph, on a cluster with as many
devices.
"""

import json
import os
from typing import Dict

import tensorflow as tf

from tfplace.errors import PlacementError
from tfplace.io_utils import atomic_write

NETWORK_DIR = "network"
SIZES_FILE = "sizes.json"
WEIGHTS = "weights"


def network_dir(path: str) -> str:
  """The network directory of a search logdir (or the directory itself)."""
  if tf.io.gfile.exists(os.path.join(path, SIZES_FILE)):
    return path
  return os.path.join(path, NETWORK_DIR)


def save_network(network, logdir: str, sizes: Dict[str, object]) -> str:
  """Writes `network.transferable()` and `sizes` under `logdir`; returns the
  network directory."""
  directory = os.path.join(logdir, NETWORK_DIR)
  tf.io.gfile.makedirs(directory)
  tf.train.Checkpoint(**network.transferable()).write(
      os.path.join(directory, WEIGHTS))
  atomic_write(os.path.join(directory, SIZES_FILE),
               json.dumps(sizes, indent=1, sort_keys=True))
  return directory


def load_network(network, source: str, sizes: Dict[str, object]) -> str:
  """Reads the weights saved under `source` into `network`; returns the
  network directory.

  Raises:
    PlacementError: `source` holds no saved network, one of other sizes
      (width, layers, heads, features, devices, vocabulary), or an
      unreadable one.
  """
  directory = network_dir(source)
  sizes_path = os.path.join(directory, SIZES_FILE)
  if not tf.io.gfile.exists(sizes_path):
    raise PlacementError(
        f"{source} holds no trained GDP network ({NETWORK_DIR}/{SIZES_FILE}"
        f" is missing): pretrained must be the logdir of a finished gdp "
        f"search")
  with tf.io.gfile.GFile(sizes_path) as f:
    saved = json.loads(f.read())
  sizes = json.loads(json.dumps(sizes))  # Tuples as JSON lists.
  differ = sorted(k for k in set(saved) | set(sizes)
                  if saved.get(k) != sizes.get(k))
  if differ:
    shown = ", ".join(f"{k} {saved.get(k)!r} there, {sizes.get(k)!r} here"
                      for k in differ)
    raise PlacementError(
        f"the network in {directory} does not fit this search ({shown}): "
        f"pretrain on a cluster with as many devices, with the same hidden, "
        f"sage_layers, attention_layers and heads")
  network.create_variables()  # The variables to restore into.
  try:
    tf.train.Checkpoint(**network.transferable()).read(
        os.path.join(directory, WEIGHTS)).assert_existing_objects_matched()
  except (tf.errors.OpError, ValueError, AssertionError) as e:
    raise PlacementError(
        f"cannot read the network in {directory}: {e}") from e
  return directory
