"""Ops of multi-device runs against the same ops alone, by idle gap."""

import numpy as np
import pytest

import tfplace  # noqa: F401
from tfplace.experiments.idle_slowdown import op_pairs, slowdown_table
from tfplace.measurement.batch import MeasureOutcome
from tfplace.measurement.calibration_runs import GraphRuns
from tfplace.measurement.local_cluster import make_worker_cluster
from tfplace.measurement.timing import OpRecord, timing_from_steps
from tfplace.models.registry import build_model
from tfplace.placement import Placement

US = 1e-6


def _outcome(records):
  return MeasureOutcome("key", timing_from_steps(
      np.full(3, 1e-3), op_records=tuple(OpRecord(*r) for r in records)))


@pytest.fixture(scope="module")
def runs():
  cluster = make_worker_cluster(2)
  d0, d1 = cluster.device_names
  graph = build_model("calib_matmul", batch_size=4, widths=[8, 16, 8],
                      groups=2)
  alone = Placement.from_array(graph, cluster,
                               np.zeros(graph.num_ops, np.int32))
  split = Placement.from_array(graph, cluster,
                               (np.arange(graph.num_ops) % 2).astype(np.int32))
  # Alone: every op 10 us, "tiny" 3 us (under the 5 us floor).
  solo = [(n, d0, 10 * i * US, 10 * US) for i, n in enumerate("abcde")]
  solo.append(("tiny", d0, 60 * US, 3 * US))
  # Split: on d0, b right after a (x1.5), then c after 200 us idle (x3),
  # then tiny; on d1, d first (no gap), e after 50 us idle (x2).
  two = [("a", d0, 0.0, 10 * US), ("b", d0, 10 * US, 15 * US),
         ("c", d0, 225 * US, 30 * US), ("tiny", d0, 400 * US, 9 * US),
         ("d", d1, 0.0, 10 * US), ("e", d1, 60 * US, 20 * US)]
  return GraphRuns("g", graph, (("single", alone), ("split", split),
                                ("failed", split)),
                   (_outcome(solo), _outcome(two),
                    MeasureOutcome("key", None, "deadline exceeded")))


def test_pairs_skip_first_ops_short_ops_and_failed_runs(runs):
  pairs = np.array(sorted(op_pairs(runs))) / US
  np.testing.assert_allclose(pairs, [[0, 15, 10], [50, 20, 10],
                                     [200, 30, 10]], atol=1e-9)


def test_rows_per_gap_bucket_and_over_all(runs):
  rows = slowdown_table([runs, runs])
  assert [(r.graph, r.bucket, r.num_ops) for r in rows] == [
      ("g", "< 20 us", 2), ("g", "20-100 us", 2), ("g", ">= 100 us", 2),
      ("all", "< 20 us", 2), ("all", "20-100 us", 2), ("all", ">= 100 us", 2)]
  by_bucket = {r.bucket: r for r in rows if r.graph == "g"}
  assert by_bucket["< 20 us"].median_ratio == pytest.approx(1.5)
  assert by_bucket["20-100 us"].median_ratio == pytest.approx(2.0)
  assert by_bucket[">= 100 us"].median_ratio == pytest.approx(3.0)
  assert by_bucket[">= 100 us"].mean_excess_s == pytest.approx(20 * US)
  assert slowdown_table([runs], min_base_s=20 * US) == []
