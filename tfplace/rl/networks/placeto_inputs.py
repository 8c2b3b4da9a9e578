"""What Placeto's networks compute from one observation, before any weight.

Per group (node-major [G, N, F] for N states): the static features of
`ProgressiveGraph`, the current device one-hot, the "visited" and
"current" bits, the start time relative to the current group's in the
simulated schedule, and the compute time on its current device. Per device,
for the group being placed ([N, D, 6]): its compute time there, the compute
already placed there by its parallel peers and by every group, the share of
its input and output bytes whose other end is there, and whether it is there
now. Times are in units of the start step time and log-scaled
(`scaled_time`); everything lies in [-1, 1].
"""

from typing import Dict, Tuple

import numpy as np
import tensorflow as tf

from tfplace.rl.progressive_graph import ProgressiveGraph

TIME_SCALE = 1e-3  # Times below this fraction of the start step time are ~0.
NUM_DEVICE_FEATURES = 6


def scaled_time(x: tf.Tensor) -> tf.Tensor:
  """Times over the start step time, log-scaled: 1 -> 1, 0 -> 0."""
  return tf.math.log1p(tf.maximum(x, 0.0) / TIME_SCALE) / np.log1p(
      1.0 / TIME_SCALE)


def flatten_outer(observation: Dict[str, tf.Tensor]
                  ) -> Tuple[Dict[str, tf.Tensor], tf.Tensor]:
  """Observations with outer dims [B] or [B, T] -> [N]; and the outer shape."""
  outer = tf.shape(observation["step"])
  flat = {}
  for key, value in observation.items():
    inner = tf.shape(value)[tf.size(outer):]
    flat[key] = tf.reshape(value, tf.concat([[-1], inner], axis=0))
  return flat, outer


class PlacetoInputs(tf.Module):
  """The graph's constants, and the features they give each observation."""

  def __init__(self, graph: ProgressiveGraph, name: str = "placeto_inputs"):
    super().__init__(name=name)
    g, d = graph.num_groups, graph.num_devices
    self.num_groups, self.num_devices = g, d
    self.static = tf.constant(graph.features, tf.float32)  # [G, Fs]
    self.order = tf.constant(graph.order, tf.int32)
    self.position = tf.constant(graph.position, tf.int32)
    compute = np.where(np.isfinite(graph.compute_s), graph.compute_s, 0.0)
    self.compute = tf.constant(compute / graph.reference_s, tf.float32)
    relations = np.stack([graph.ancestors, graph.descendants,
                          graph.parallel]).astype(np.float32)
    self.relations = tf.constant(relations)  # [3, G, G]
    inbound = np.zeros((g, g), np.float64)  # [consumer, producer] bytes.
    np.add.at(inbound, (graph.edge_dst, graph.edge_src), graph.edge_bytes)
    self.inbound = tf.constant(_row_shares(inbound), tf.float32)
    self.outbound = tf.constant(_row_shares(inbound.T), tf.float32)
    self.num_node_features = graph.features.shape[1] + d + 4

  def current(self, step: tf.Tensor) -> tf.Tensor:
    """int32 [N]: the group placed at `step` [N] (the last one at the end)."""
    return tf.gather(self.order, tf.minimum(step, self.num_groups - 1))

  def node_features(self, obs: Dict[str, tf.Tensor]) -> tf.Tensor:
    """float32 [G, N, F] from flattened observations."""
    n = tf.shape(obs["step"])[0]
    step = obs["step"][:, None]
    current = self.current(obs["step"])
    onehot = tf.one_hot(obs["devices"], self.num_devices)  # [N, G, D]
    start = obs["start_s"]
    relative = start - tf.gather(start, current[:, None], batch_dims=1)
    on_device = tf.reduce_sum(onehot * self.compute[None], axis=-1)
    columns = [
        onehot,
        tf.cast(self.position[None] < step, tf.float32)[..., None],
        tf.cast(self.position[None] == step, tf.float32)[..., None],
        tf.clip_by_value(relative, -1.0, 1.0)[..., None],
        scaled_time(on_device)[..., None]]
    dynamic = tf.concat(columns, axis=-1)  # [N, G, D + 4]
    static = tf.broadcast_to(self.static[None],
                             [n, self.num_groups, self.static.shape[1]])
    return tf.transpose(tf.concat([static, dynamic], -1), [1, 0, 2])

  def relation_masks(self, obs: Dict[str, tf.Tensor]) -> tf.Tensor:
    """float32 [4, N, G]: current group, its ancestors, descendants, peers."""
    current = self.current(obs["step"])
    rows = tf.gather(self.relations, current, axis=1)  # [3, N, G]
    itself = tf.one_hot(current, self.num_groups)[None]
    return tf.concat([itself, rows], axis=0)

  def device_features(self, obs: Dict[str, tf.Tensor]) -> tf.Tensor:
    """float32 [N, D, NUM_DEVICE_FEATURES] for the group being placed."""
    current = self.current(obs["step"])
    onehot = tf.one_hot(obs["devices"], self.num_devices)  # [N, G, D]
    placed = onehot * self.compute[None]  # Compute placed on each device.
    peers = tf.gather(self.relations[2], current)  # [N, G]
    columns = [
        scaled_time(tf.gather(self.compute, current)),
        scaled_time(tf.einsum("ng,ngd->nd", peers, placed)),
        scaled_time(tf.reduce_sum(placed, axis=1)),
        tf.einsum("ng,ngd->nd", tf.gather(self.inbound, current), onehot),
        tf.einsum("ng,ngd->nd", tf.gather(self.outbound, current), onehot),
        tf.gather(onehot, current[:, None], batch_dims=1)[:, 0]]
    return tf.stack(columns, axis=-1)


def _row_shares(matrix: np.ndarray) -> np.ndarray:
  """Each row divided by its sum (rows of zeros stay zero)."""
  total = matrix.sum(axis=1, keepdims=True)
  return matrix / np.where(total > 0, total, 1.0)
