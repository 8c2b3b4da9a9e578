"""Measure many placements of one graph: parallel, cached, failure-tolerant.

Each placement's outcome is either a `StepTiming` or an error message; one
failing placement never sinks the batch. Results are cached as JSON files in
`cache_dir`, keyed by the graph fingerprint, the placement and the measurement
settings, so a repeated batch only measures what is new.

Parallel measurement (`workers` > 1) runs placements in separate processes;
on a machine with few cores they compete for them, so use it for throughput
on server clusters, not for careful timings.

`measure_rounds` measures the batch several times in rotated orders and
keeps each placement's median round: on a shared machine the same placement
measures 15-35 % apart from one minute to the next, far more than within
one placement's timed steps.
"""

import concurrent.futures
import dataclasses
import hashlib
import json
import multiprocessing
import os
from typing import List, Optional, Sequence, Tuple

from absl import logging
from tqdm.auto import tqdm

from tfplace.cost.cluster import Cluster
from tfplace.errors import MeasureError, TfplaceError
from tfplace.graph.op_graph import OpGraph
from tfplace.io_utils import atomic_write
from tfplace.measurement.config import MeasureConfig
from tfplace.measurement.feeds import FeedOptions, StepInputs, resolve_inputs
from tfplace.measurement.runner import measure
from tfplace.measurement.timing import StepTiming
from tfplace.placement import Placement

CACHE_FORMAT = "tfplace.measure_cache/1"


@dataclasses.dataclass(frozen=True)
class MeasureOutcome:
  """What measuring one placement gave.

  Attributes:
    placement_key: the cache key of (graph, placement, settings).
    timing: the step timing, or None if the measurement failed.
    error: the failure message, or None.
    cached: True if the timing came from the cache.
    round_step_times_s: the median step time of each successful round, in
      round order, when `measure_rounds` measured it more than once (the
      kept timing is one of them); empty otherwise.
  """
  placement_key: str
  timing: Optional[StepTiming]
  error: Optional[str] = None
  cached: bool = False
  round_step_times_s: Tuple[float, ...] = ()

  @property
  def ok(self) -> bool:
    return self.timing is not None


@dataclasses.dataclass(frozen=True)
class _Job:
  graph: OpGraph
  placement: Placement
  cluster: Optional[Cluster]
  config: MeasureConfig
  inputs: StepInputs


def placement_key(graph: OpGraph, placement: Placement,
                  config: Optional[MeasureConfig] = None,
                  inputs: Optional[StepInputs] = None) -> str:
  """A stable hash of the graph fingerprint and shapes (the same graph at
  another size is another graph), the placement and the settings that
  change a timing (server or in process, warmup and timed steps, what is
  fed: a graph without feeds keeps the key it had before feeds)."""
  config = config or MeasureConfig()
  h = hashlib.sha256()
  h.update(graph.fingerprint.encode())
  h.update(repr([op.output_shapes for op in graph.ops]).encode())
  h.update(json.dumps(sorted(placement.devices.items())).encode())
  h.update(f"|remote={config.remote}|warmup={config.warmup}|"
           f"steps={config.steps}".encode())
  fed = inputs.fingerprint() if inputs is not None else ""
  if fed:
    h.update(f"|inputs={fed}".encode())
  return h.hexdigest()[:24]


def measure_batch(graph: OpGraph, placements: Sequence[Placement],
                  config: Optional[MeasureConfig] = None, *,
                  cluster: Optional[Cluster] = None, workers: int = 1,
                  cache_dir: Optional[str] = None,
                  progress: bool = True, feeds=None,
                  feed_options: Optional[FeedOptions] = None
                  ) -> List[MeasureOutcome]:
  """Measures each placement; failures are reported per placement.

  Args:
    graph: the training step.
    placements: the placements to measure.
    config: target, warmup and timed steps, deadlines (per placement).
    cluster: optional cluster each placement must fit.
    workers: parallel measurement processes (1: in this process, in order).
    cache_dir: directory of cached outcomes (None: no cache).
    progress: show a tqdm bar.
    feeds: values for the graph's placeholders (see `measure`), the same
      for every placement.
    feed_options: how synthetic input values are made.

  Returns:
    One `MeasureOutcome` per placement, in input order.

  Raises:
    FeedError: a feed does not fit the graph (before anything runs).
  """
  config = config or MeasureConfig()
  inputs = resolve_inputs(graph, feeds, feed_options)
  for line in inputs.describe():
    logging.info("%s input: %s", graph.name, line)
  keys = [placement_key(graph, p, config, inputs) for p in placements]
  outcomes: List[Optional[MeasureOutcome]] = [
      _cached(cache_dir, k) for k in keys]
  todo = [i for i, o in enumerate(outcomes) if o is None]
  jobs = {i: _Job(graph, placements[i], cluster, config, inputs)
          for i in todo}
  bar = tqdm(total=len(placements), initial=len(placements) - len(todo),
             desc=f"measure {graph.name}", disable=not progress)
  for i, outcome in _run_jobs(jobs, keys, workers, config.timeout_s):
    outcomes[i] = outcome
    if outcome.ok and cache_dir:
      _store(cache_dir, outcome)
    bar.update(1)
  bar.close()
  failed = sum(1 for o in outcomes if not o.ok)
  if failed:
    logging.warning("%d of %d placements failed to measure", failed,
                    len(placements))
  return list(outcomes)


def round_order(count: int, round_index: int) -> list:
  """The order of round `round_index`: rotated by it, reversed if odd."""
  shift = round_index % max(count, 1)
  order = list(range(shift, count)) + list(range(shift))
  return order[::-1] if round_index % 2 else order


def measure_rounds(graph: OpGraph, placements: Sequence[Placement],
                   config: Optional[MeasureConfig] = None, *, rounds: int = 1,
                   cluster: Optional[Cluster] = None,
                   cache_dir: Optional[str] = None, progress: bool = True,
                   feeds=None, feed_options: Optional[FeedOptions] = None
                   ) -> List[MeasureOutcome]:
  """`measure_batch` `rounds` times, each round in `round_order`; each
  placement's outcome is the one of its median round by median step time
  (the lower median for an even number of successful rounds), a failure
  only if every round failed (the first round's error), with every
  successful round's median step time (`MeasureOutcome.round_step_times_s`)
  when rounds > 1. Round r > 0 caches in `cache_dir`/round<r>, so an
  interrupted run resumes.

  Raises:
    MeasureError: rounds < 1.
  """
  if int(rounds) != rounds or rounds < 1:
    raise MeasureError(f"rounds must be an integer >= 1, got {rounds!r}")
  inputs = resolve_inputs(graph, feeds, feed_options)
  per_round = []
  for r in range(rounds):
    order = round_order(len(placements), r)
    outcomes = measure_batch(
        graph, [placements[i] for i in order], config, cluster=cluster,
        cache_dir=(os.path.join(cache_dir, f"round{r}") if cache_dir and r
                   else cache_dir),
        progress=progress, feeds=inputs)
    by_index = dict(zip(order, outcomes))
    per_round.append([by_index[i] for i in range(len(placements))])
  return [_median_round([rnd[i] for rnd in per_round])
          for i in range(len(placements))]


def _median_round(outcomes: Sequence[MeasureOutcome]) -> MeasureOutcome:
  ok = [o for o in outcomes if o.ok]
  if not ok:
    return outcomes[0]
  kept = sorted(ok, key=lambda o: o.timing.median_step_time_s)[
      (len(ok) - 1) // 2]
  if len(outcomes) == 1:
    return kept
  return dataclasses.replace(kept, round_step_times_s=tuple(
      o.timing.median_step_time_s for o in ok))


def _run_jobs(jobs, keys, workers: int, timeout_s: float):
  """Yields (index, outcome) as jobs finish."""
  if workers <= 1 or len(jobs) <= 1:
    for i, job in jobs.items():
      yield i, _outcome(keys[i], job)
    return
  context = multiprocessing.get_context("spawn")
  pool = concurrent.futures.ProcessPoolExecutor(max_workers=workers,
                                                mp_context=context)
  try:
    futures = {i: pool.submit(_outcome, keys[i], job) for i, job in jobs.items()}
    for i, future in futures.items():
      try:
        yield i, future.result(timeout=timeout_s + 120)
      except concurrent.futures.TimeoutError:
        yield i, MeasureOutcome(keys[i], None, f"no result within "
                                f"{timeout_s + 120:.0f} s")
      except Exception as e:  # pylint: disable=broad-except
        # A crashed worker process (BrokenProcessPool) lands here.
        yield i, MeasureOutcome(keys[i], None, f"{type(e).__name__}: {e}")
  finally:
    pool.shutdown(wait=False, cancel_futures=True)


def _outcome(key: str, job: _Job) -> MeasureOutcome:
  """Measures one job; any failure becomes an error outcome."""
  try:
    timing = measure(job.graph, job.placement, job.config,
                     cluster=job.cluster, feeds=job.inputs)
    return MeasureOutcome(key, timing)
  except TfplaceError as e:
    return MeasureOutcome(key, None, str(e))
  except Exception as e:  # pylint: disable=broad-except
    logging.exception("measuring placement %s crashed", key)
    return MeasureOutcome(key, None, f"{type(e).__name__}: {e}")


def _cache_path(cache_dir: str, key: str) -> str:
  return os.path.join(cache_dir, f"{key}.json")


def _cached(cache_dir: Optional[str], key: str) -> Optional[MeasureOutcome]:
  if not cache_dir:
    return None
  path = _cache_path(cache_dir, key)
  try:
    with open(path) as f:
      data = json.load(f)
    if data.get("format") != CACHE_FORMAT:
      return None
    return MeasureOutcome(key, StepTiming.from_dict(data["timing"]),
                          cached=True)
  except FileNotFoundError:
    return None
  except (ValueError, KeyError, TypeError) as e:
    logging.warning("ignoring unreadable cache entry %s: %s", path, e)
    return None


def _store(cache_dir: str, outcome: MeasureOutcome) -> None:
  atomic_write(_cache_path(cache_dir, outcome.placement_key), json.dumps(
      {"format": CACHE_FORMAT, "timing": outcome.timing.to_dict()}))
