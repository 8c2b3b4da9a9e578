"""GDP's policy: GraphSAGE embedding, segment attention, a device per unit.

Zhou et al., "GDP: Generalized Device Placement for Dataflow Graphs" (2019).
The policy reads the graph with GraphSAGE (`graphsage.GraphSage`), takes
the node embeddings in topological order through a Transformer-XL style
attention network (`segment_attention.SegmentAttention`) and gives every
node a device in one pass. Parameter superposition: a gate per attention
layer, computed from the mean of the graph's embeddings, scales that
layer's input, so one set of weights can serve several graphs.

As in the other placers' networks (`seq2seq_placer`), the graph is a
constant: the embedding and attention run once per call whatever the batch
size, and a trainable bias per unit and device (`heads.RowBias`) is added
to the logits for the imitation warm start (`tfplace.rl.imitation`). The
bias is the only weight tied to one graph; the others move between graphs
(`transferable`, `tfplace.rl.transfer`), or are shared by the networks of
several graphs trained at once (`share_weights_with`, GDP's batch training:
`tfplace.rl.batch_training`).
"""

from typing import Optional

import numpy as np
import tensorflow as tf

from tfplace.rl.networks.graphsage import GraphSage
from tfplace.rl.networks.segment_attention import SegmentAttention
from tfplace.rl.networks.unit_placer import UnitPlacerNetwork

keras = tf.keras


class GDPNetwork(UnitPlacerNetwork):
  """Observation ``{"allowed": bool [B, U, D]}`` -> a distribution with event
  shape [U] over masked logits (`heads.placement_distribution`)."""

  def __init__(self, observation_spec, action_spec, features: np.ndarray,
               edge_src: np.ndarray, edge_dst: np.ndarray, order: np.ndarray,
               hidden: int = 64, sage_layers: int = 3,
               attention_layers: int = 2, heads: int = 4,
               segment_length: int = 64, shared_logits: bool = True,
               bias_scale: float = 1.0, name: str = "GDPNetwork",
               share_weights_with: Optional["GDPNetwork"] = None):
    """Args:
      observation_spec: the environment's observation spec ("allowed").
      action_spec: int [U] in [0, D).
      features: float32 [U, F] per-unit features (unit id order).
      edge_src, edge_dst: the unit graph's edges (unit ids).
      order: int [U], the unit ids in topological order (the attention's
        sequence).
      hidden: width of the embedding and of the attention network.
      sage_layers: GraphSAGE layers.
      attention_layers, heads, segment_length: the attention network.
      shared_logits: one logits table for the whole batch (REINFORCE) or
        logits per batch entry (what PPO logs).
      bias_scale: speed of the per-unit biases (`heads.RowBias`).
      share_weights_with: another graph's `GDPNetwork`, built with the same
        sizes: this network uses its graph-independent layers (the same
        variables; only the per-unit bias is its own). None: its own.

    Raises:
      ValueError: `share_weights_with` has other sizes.
    """
    super().__init__(observation_spec, action_spec, len(order), shared_logits,
                     bias_scale, name)
    num_units = len(order)
    order = np.asarray(order, np.int32)
    self._features = tf.constant(np.asarray(features, np.float32))
    self._order = tf.constant(order)
    self._unsort = tf.constant(np.argsort(order).astype(np.int32))
    self._hidden = hidden
    self._sizes = {"hidden": hidden, "sage_layers": sage_layers,
                   "attention_layers": attention_layers, "heads": heads,
                   "num_features": int(np.shape(features)[1]),
                   "num_devices": self.num_devices}
    other = share_weights_with
    if other is not None and other.transfer_sizes() != self._sizes:
      raise ValueError(f"cannot share the weights of a GDP network of sizes "
                       f"{other.transfer_sizes()} with one of {self._sizes}")
    shared = other.transferable() if other is not None else {}
    self._embedding = GraphSage(
        num_units, edge_src, edge_dst, hidden, sage_layers,
        share_weights_with=shared.get("embedding"))
    self._attention = SegmentAttention(
        num_units, hidden, attention_layers, heads, segment_length,
        share_weights_with=shared.get("attention"))
    self._gate = shared.get("superposition") or keras.layers.Dense(
        attention_layers * hidden, activation="sigmoid", name="superposition")
    self._logits = shared.get("device_logits") or keras.layers.Dense(
        self.num_devices, name="device_logits")

  def transferable(self):
    """The weights that do not depend on the graph, by name (everything but
    the per-unit bias): what `tfplace.rl.transfer` saves and loads."""
    return {"embedding": self._embedding, "attention": self._attention,
            "superposition": self._gate, "device_logits": self._logits}

  def transfer_sizes(self):
    """What another graph's network must share to take these weights."""
    return dict(self._sizes)

  def network_logits(self, training: bool) -> tf.Tensor:
    embeddings = self._embedding(self._features)
    context = tf.reduce_mean(embeddings, axis=0, keepdims=True)
    gate = tf.reshape(self._gate(context),
                      [self._attention.num_layers, self._hidden])
    sequence = tf.gather(embeddings, self._order)
    placed = self._attention(sequence, gate, training=training)
    return tf.gather(self._logits(placed), self._unsort)
