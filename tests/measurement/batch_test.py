"""Tests for tfplace.measurement.batch: cache and per-placement failures."""

import os

import pytest

import tfplace  # noqa: F401
from tfplace.measurement.batch import measure_batch, placement_key
from tfplace.measurement.config import MeasureConfig
from tfplace.models.registry import build_model
from tfplace.placement import Placement

CPU = "/job:localhost/replica:0/task:0/device:CPU:%d"


@pytest.fixture(scope="module")
def graph():
  return build_model("mlp_towers", num_towers=2, hidden=8, batch_size=4,
                     input_size=8, num_layers=1)


def test_cache_hit_and_failure_isolated(graph, tmp_path):
  good = Placement({op.name: CPU % 0 for op in graph.ops})
  split = Placement({op.name: CPU % (int(graph.group_of[i]) % 2)
                     for i, op in enumerate(graph.ops)})
  bad = Placement({op.name: "/job:worker/replica:0/task:3/device:CPU:0"
                   for op in graph.ops})
  cache = str(tmp_path / "cache")
  config = MeasureConfig(warmup=0, steps=2)
  first = measure_batch(graph, [good, bad, split], config, cache_dir=cache,
                        progress=False)
  assert [o.ok for o in first] == [True, False, True]
  assert "not a local device" in first[1].error
  assert not any(o.cached for o in first)
  assert len(os.listdir(cache)) == 2  # failures are not cached
  second = measure_batch(graph, [good, split], config, cache_dir=cache,
                         progress=False)
  assert [o.cached for o in second] == [True, True]
  assert second[0].timing == first[0].timing
  assert second[1].placement_key == first[2].placement_key


def test_key_depends_on_placement_and_settings(graph):
  a = Placement({op.name: CPU % 0 for op in graph.ops})
  b = Placement({op.name: CPU % 1 for op in graph.ops})
  assert placement_key(graph, a) == placement_key(graph, a)
  assert placement_key(graph, a) != placement_key(graph, b)
  assert placement_key(graph, a) == placement_key(graph, a, MeasureConfig())
  assert placement_key(graph, a) != placement_key(graph, a,
                                                  MeasureConfig(steps=3))
  assert placement_key(graph, a) != placement_key(
      graph, a, MeasureConfig(target="grpc://127.0.0.1:1"))
  # Deadlines do not change a timing, so they do not change the key.
  assert placement_key(graph, a) == placement_key(
      graph, a, MeasureConfig(timeout_s=5, step_timeout_s=1))


def test_placeholder_graph_batch_states_its_inputs(tmp_path):
  from tfplace.measurement.feeds import FeedOptions, resolve_inputs
  g = build_model("small_cnn", batch_size=2, image_size=8,
                  placeholder_inputs=True)
  one = Placement({op.name: CPU % 0 for op in g.ops})
  split = Placement({op.name: CPU % (int(g.group_of[i]) % 2)
                     for i, op in enumerate(g.ops)})
  config = MeasureConfig(warmup=0, steps=2)
  outcomes = measure_batch(g, [one, split], config, progress=False,
                           cache_dir=str(tmp_path))
  assert all(o.ok for o in outcomes), [o.error for o in outcomes]
  for o in outcomes:
    assert {(i.name, i.source) for i in o.timing.inputs} == {
        ("images", "synthetic"), ("labels", "synthetic")}
  # What is fed is part of the cache key; a graph without feeds keeps the
  # key it had before feeds existed.
  seed0 = resolve_inputs(g)
  seed1 = resolve_inputs(g, options=FeedOptions(seed=1))
  assert (placement_key(g, one, config, seed0)
          != placement_key(g, one, config, seed1))
  assert outcomes[0].placement_key == placement_key(g, one, config, seed0)
  plain = build_model("mlp_towers", num_towers=2, hidden=8, batch_size=4,
                      input_size=8, num_layers=1)
  p = Placement({op.name: CPU % 0 for op in plain.ops})
  assert placement_key(plain, p, config) == placement_key(
      plain, p, config, resolve_inputs(plain))


def test_rounds_keep_each_placements_median_round(graph, monkeypatch):
  from tfplace.measurement import batch
  from tfplace.measurement.batch import MeasureOutcome, measure_rounds
  from tfplace.measurement.timing import StepTiming
  placements = [Placement({op.name: CPU % 0 for op in graph.ops}),
                Placement({op.name: CPU % 1 for op in graph.ops}),
                Placement({op.name: CPU % 2 for op in graph.ops})]
  # Placement i in round r takes times[i][r] seconds (None: fails).
  times = [[3.0, 1.0, 2.0], [5.0, None, 4.0], [None, None, None]]
  calls = []

  def fake_batch(g, ps, config=None, *, cache_dir=None, **kwargs):
    r = len(calls)
    calls.append(([placements.index(p) for p in ps], cache_dir))
    out = []
    for p in ps:
      t = times[placements.index(p)][r]
      out.append(MeasureOutcome(f"k{r}", None, f"failed in round {r}")
                 if t is None else MeasureOutcome(
                     f"k{r}", StepTiming(t, t, t, 0.0, 0.0, (t,))))
    return out

  monkeypatch.setattr(batch, "measure_batch", fake_batch)
  outcomes = measure_rounds(graph, placements, rounds=3, cache_dir="/c",
                            progress=False)
  # Rotated, reversed every other round; round r > 0 caches apart.
  assert calls == [([0, 1, 2], "/c"), ([0, 2, 1], "/c/round1"),
                   ([2, 0, 1], "/c/round2")]
  assert outcomes[0].timing.median_step_time_s == 2.0
  assert outcomes[0].placement_key == "k2"
  # Every successful round's median, in round order.
  assert outcomes[0].round_step_times_s == (3.0, 1.0, 2.0)
  # Two good rounds: the lower median.
  assert outcomes[1].timing.median_step_time_s == 4.0
  assert outcomes[1].round_step_times_s == (5.0, 4.0)
  assert not outcomes[2].ok and outcomes[2].error == "failed in round 0"
  assert outcomes[2].round_step_times_s == ()
  calls.clear()
  single = measure_rounds(graph, placements[:1], rounds=1, progress=False)[0]
  assert single.timing.median_step_time_s == 3.0
  assert single.round_step_times_s == ()
  assert calls == [([0], None)]
  for bad in (0, 1.5):
    with pytest.raises(Exception, match="rounds must be an integer"):
      measure_rounds(graph, placements, rounds=bad, progress=False)
