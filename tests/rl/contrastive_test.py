"""Deep Graph Infomax pre-training: it learns to tell a graph from its
corruption, stops on patience, refuses bad sizes."""

import tfplace  # noqa: F401  (before TensorFlow)

import numpy as np
import pytest
import tensorflow as tf

from tfplace.errors import PlacementError
from tfplace.rl.contrastive import dgi_loss, pretrain
from tfplace.rl.networks.gcn import GraphConvolution


def clustered_graph(seed=0, clusters=4, size=12):
  """Dense clusters of nodes with a feature pattern each: a node's
  neighbourhood agrees with its own features, a shuffled one does not."""
  rng = np.random.default_rng(seed)
  n = clusters * size
  label = np.repeat(np.arange(clusters), size)
  src, dst = np.nonzero((label[:, None] == label[None]) &
                        (rng.random((n, n)) < 0.4))
  centres = rng.normal(size=(clusters, 8)) * 2.0
  features = centres[label] + 0.3 * rng.normal(size=(n, 8))
  return n, src, dst, features.astype(np.float32)


def test_pretraining_learns_to_tell_the_graph_from_its_corruption(tmp_path):
  n, src, dst, features = clustered_graph()
  tf.keras.utils.set_random_seed(0)
  encoder = GraphConvolution(n, src, dst, hidden=16, layers=1)
  initial = encoder(features).numpy()
  report = pretrain(encoder, features, hidden=16, steps=300, lr=1e-2,
                    patience=300, seed=0, logdir=str(tmp_path))
  assert report.steps == 300
  assert report.first_loss > 0.6 and report.best_loss < 0.45
  assert report.accuracy > 0.8
  assert list((tmp_path / "pretrain").iterdir())  # TensorBoard curves.
  trained = encoder(features).numpy()
  assert np.isfinite(trained).all() and not np.allclose(initial, trained)


def test_patience_stops_early_and_bad_sizes_are_refused():
  n, src, dst, features = clustered_graph(1)
  encoder = GraphConvolution(n, src, dst, hidden=8, layers=1)
  report = pretrain(encoder, features, hidden=8, steps=500, lr=1e-6,
                    patience=3, seed=0)
  assert report.steps < 500
  with pytest.raises(ValueError, match="steps >= 1 and patience >= 1"):
    pretrain(encoder, features, hidden=8, steps=0)
  with pytest.raises(PlacementError, match="no finite loss"):
    pretrain(encoder, np.full_like(features, np.nan), hidden=8, steps=10,
             patience=3)


def test_loss_is_chance_for_indistinguishable_scores():
  zeros = tf.zeros([5])
  assert float(dgi_loss(zeros, zeros)) == pytest.approx(np.log(2.0))
  assert float(dgi_loss(zeros + 20, zeros - 20)) < 1e-6


def test_max_seconds_stops_it_after_the_step_that_spends_them():
  n, src, dst, features = clustered_graph(2)
  encoder = GraphConvolution(n, src, dst, hidden=8, layers=1)
  report = pretrain(encoder, features, hidden=8, steps=500, lr=1e-2,
                    patience=500, seed=0, max_seconds=1e-9)
  assert (report.steps, report.stopped_by) == (1, "time")
  report = pretrain(encoder, features, hidden=8, steps=5, lr=1e-2,
                    patience=500, seed=0, max_seconds=1e9)
  assert (report.steps, report.stopped_by) == (5, "steps")
  report = pretrain(encoder, features, hidden=8, steps=500, lr=1e-7,
                    patience=2, seed=0)
  assert report.stopped_by == "patience"
