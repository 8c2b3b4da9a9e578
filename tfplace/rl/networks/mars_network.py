"""Mars's policy: a GCN graph encoder and a segment-level seq2seq placer.

Lan, Chen, Li, "Accelerated Device Placement Optimization with Contrastive
Learning" (ICPP 2021). The encoder (`gcn.GraphConvolution`) embeds every
unit of the graph; it can be pre-trained without any placement by Deep
Graph Infomax (`tfplace.rl.contrastive`). The light-weight placer
(`segment_seq2seq.SegmentSeq2Seq`) reads the embeddings in topological
order, segment by segment, and gives every unit logits. The encoder keeps
training with the placer during the search.

As in the other one-shot placers (`unit_placer`), the graph is a constant:
the encoder and placer run once per call whatever the batch size, and a
trainable bias per unit and device is added to the logits for the imitation
warm start.
"""

import numpy as np
import tensorflow as tf

from tfplace.rl.networks.gcn import GraphConvolution
from tfplace.rl.networks.segment_seq2seq import SegmentSeq2Seq
from tfplace.rl.networks.unit_placer import UnitPlacerNetwork


class MarsNetwork(UnitPlacerNetwork):
  """Observation ``{"allowed": bool [B, U, D]}`` -> a distribution with event
  shape [U] over masked logits (`heads.placement_distribution`)."""

  def __init__(self, observation_spec, action_spec, features: np.ndarray,
               edge_src: np.ndarray, edge_dst: np.ndarray, order: np.ndarray,
               hidden: int = 64, gcn_layers: int = 2,
               segment_length: int = 32, shared_logits: bool = True,
               bias_scale: float = 1.0, name: str = "MarsNetwork"):
    """Args:
      observation_spec: the environment's observation spec ("allowed").
      action_spec: int [U] in [0, D).
      features: float32 [U, F] per-unit features (unit id order).
      edge_src, edge_dst: the unit graph's edges (unit ids).
      order: int [U], the unit ids in topological order (the placer's
        sequence).
      hidden: width of the encoder's embeddings and of the placer's LSTMs.
      gcn_layers: graph convolutions of the encoder.
      segment_length: units per segment of the placer.
      shared_logits: one logits table for the whole batch (REINFORCE) or
        logits per batch entry (what PPO logs).
      bias_scale: speed of the per-unit biases (`heads.RowBias`).
    """
    super().__init__(observation_spec, action_spec, len(order), shared_logits,
                     bias_scale, name)
    order = np.asarray(order, np.int32)
    self.node_features = tf.constant(np.asarray(features, np.float32))
    self._order = tf.constant(order)
    self._unsort = tf.constant(np.argsort(order).astype(np.int32))
    self.encoder = GraphConvolution(len(order), edge_src, edge_dst, hidden,
                                    gcn_layers)
    self._placer = SegmentSeq2Seq(self.num_devices, hidden, segment_length)

  def network_logits(self, training: bool) -> tf.Tensor:
    embeddings = self.encoder(self.node_features)
    sequence = tf.gather(embeddings, self._order)[None]
    logits = self._placer(sequence, training=training)[0]
    return tf.gather(logits, self._unsort)
