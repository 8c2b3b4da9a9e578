"""Deep Graph Infomax: pre-training a graph encoder without any placement.

Velickovic, Fedus, Hamilton, Lio, Bengio, Hjelm, "Deep Graph Infomax"
(ICLR 2019), as Mars (Lan, Chen, Li, 2021) uses it before its search. The
encoder embeds the graph twice: as it is, and corrupted (the same edges,
the node features shuffled among the nodes). A summary of the true graph,
s = sigmoid(mean of its node embeddings), is scored against every node
embedding h by a bilinear discriminator h^T W s; the loss is the binary
cross-entropy of telling the true graph's nodes (label 1) from the
corrupted graph's (label 0). Minimizing it maximizes a bound on the mutual
information between the nodes and the graph, which makes each node's
embedding say what is particular about its neighbourhood, with no labels
and no simulator.

`pretrain` trains the encoder and discriminator with Adam, keeps the
encoder weights of the lowest loss seen, and stops after `patience` steps
without a new lowest loss (as DGI's reference training does), after `steps`
steps, or once `max_seconds` are spent (Mars: its share of the search's
budget).
"""

import dataclasses
import os
import time
from typing import Optional

import numpy as np
import tensorflow as tf
from absl import logging

from tfplace.errors import PlacementError


@dataclasses.dataclass(frozen=True)
class PretrainReport:
  """What a pre-training did.

  Attributes:
    steps: Adam steps taken.
    first_loss, best_loss: the loss at the first step and the lowest seen
      (ln 2 = 0.693: a discriminator that cannot tell the graphs apart).
    accuracy: at the best weights, the share of true and corrupted node
      embeddings the discriminator labels right.
    seconds: wall time.
    stopped_by: "steps" (all taken), "patience" (no lower loss for
      `patience` steps) or "time" (`max_seconds` spent).
  """
  steps: int
  first_loss: float
  best_loss: float
  accuracy: float
  seconds: float
  stopped_by: str = "steps"

  def as_dict(self) -> dict:
    return dataclasses.asdict(self)


class DeepGraphInfomax(tf.Module):
  """The DGI objective of `encoder` (features [N, F] -> embeddings [N, H]) on
  one graph's node features."""

  def __init__(self, encoder, features, hidden: int, name: str = "dgi"):
    super().__init__(name=name)
    self.encoder = encoder
    self.features = tf.convert_to_tensor(features, tf.float32)
    self.bilinear = tf.Variable(
        tf.keras.initializers.GlorotUniform()([hidden, hidden]),
        name="bilinear")

  def scores(self, permutation: tf.Tensor):
    """(true, corrupted) discriminator logits [N] each, the corrupted graph's
    features being the true ones in `permutation`'s order."""
    true = self.encoder(self.features)
    corrupted = self.encoder(tf.gather(self.features, permutation))
    summary = tf.sigmoid(tf.reduce_mean(true, axis=0))
    weighted = tf.linalg.matvec(self.bilinear, summary)
    return (tf.linalg.matvec(true, weighted),
            tf.linalg.matvec(corrupted, weighted))


def dgi_loss(true: tf.Tensor, corrupted: tf.Tensor) -> tf.Tensor:
  """Binary cross-entropy of the logits: label 1 for the true graph's nodes,
  0 for the corrupted graph's (each side weighs half)."""
  return 0.5 * (tf.reduce_mean(tf.nn.softplus(-true)) +
                tf.reduce_mean(tf.nn.softplus(corrupted)))


def pretrain(encoder, features: np.ndarray, hidden: int, steps: int = 500,
             lr: float = 1e-3, patience: int = 50, seed: Optional[int] = None,
             logdir: Optional[str] = None,
             max_seconds: Optional[float] = None) -> PretrainReport:
  """Trains `encoder` in place by DGI on one graph (see the module docstring).

  Args:
    encoder: a Keras layer, node features [N, F] -> embeddings [N, hidden].
    features: float32 [N, F], the graph's node features.
    hidden: the embeddings' width.
    steps: the most Adam steps.
    lr: Adam's learning rate.
    patience: steps without a new lowest loss before it stops.
    seed: seeds the corruptions and the discriminator's initial weights.
    logdir: if set, TensorBoard curves (loss, accuracy) go there.
    max_seconds: if set, it stops after the step that spends this much wall
      time (building and tracing included; at least one step is taken).
  """
  if steps < 1 or patience < 1:
    raise ValueError(f"pre-training needs steps >= 1 and patience >= 1, got "
                     f"{steps} and {patience}")
  start = time.perf_counter()
  if seed is not None:
    tf.random.set_seed(seed)
  objective = DeepGraphInfomax(encoder, features, hidden)
  num_nodes = int(np.shape(features)[0])
  generator = tf.random.Generator.from_seed(0 if seed is None else seed)
  optimizer = tf.keras.optimizers.Adam(lr)

  @tf.function
  def step():
    permutation = tf.argsort(generator.uniform([num_nodes]))
    with tf.GradientTape() as tape:
      true, corrupted = objective.scores(permutation)
      loss = dgi_loss(true, corrupted)
    variables = objective.trainable_variables
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    accuracy = 0.5 * (tf.reduce_mean(tf.cast(true > 0, tf.float32)) +
                      tf.reduce_mean(tf.cast(corrupted < 0, tf.float32)))
    return loss, accuracy

  encoder(objective.features)  # Builds its weights.
  writer = (tf.summary.create_file_writer(os.path.join(logdir, "pretrain"))
            if logdir else None)
  best = (np.inf, 0.0, None)  # loss, accuracy, encoder weights
  first, waited, taken, stopped_by = None, 0, 0, "steps"
  for taken in range(1, steps + 1):
    weights = encoder.get_weights()  # What this step's loss was taken at.
    loss, accuracy = (float(x) for x in step())
    first = loss if first is None else first
    if writer is not None:
      with writer.as_default(step=taken):
        tf.summary.scalar("dgi/loss", loss)
        tf.summary.scalar("dgi/accuracy", accuracy)
    if loss < best[0]:
      best, waited = (loss, accuracy, weights), 0
    else:
      waited += 1
    if waited >= patience:
      stopped_by = "patience"
    elif max_seconds is not None and (
        time.perf_counter() - start >= max_seconds) and taken < steps:
      stopped_by = "time"
    if stopped_by != "steps":
      break
  if writer is not None:
    writer.close()
  if best[2] is None:
    raise PlacementError("DGI pre-training gave no finite loss: try a "
                         "smaller learning rate (mars: pretrain_lr) or none "
                         "(pretrain_steps=0)")
  encoder.set_weights(best[2])
  report = PretrainReport(taken, first, best[0], best[1],
                          time.perf_counter() - start, stopped_by)
  logging.info("DGI pre-training: %d of %d steps (stopped by %s), loss %.4f "
               "-> %.4f, accuracy %.3f, %.1f s", report.steps, steps,
               stopped_by, report.first_loss, report.best_loss,
               report.accuracy, report.seconds)
  return report
