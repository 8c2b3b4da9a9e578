"""Place on the simulator, then let the target decide: `place_on_target`.

    search on the simulator → [verify the K best on the target]
      → [fine-tune on measured step times] → placement

`tfplace place --verify_top_k K --real_reward --target T` is this function.
"""

from typing import Optional

from tfplace import interrupts, pipeline
from tfplace.cost.cluster import Cluster
from tfplace.graph.op_graph import OpGraph
from tfplace.placement import Placement
from tfplace.placers.base import PlacerKind
from tfplace.placers.registry import get_placer
from tfplace.real.fine_tune import RealRewardSettings, fine_tune
from tfplace.real.learned_fine_tune import check_learned
from tfplace.real.target import checked_problem
from tfplace.real.verify import VerifySettings, verify_problem


def place_on_target(graph: OpGraph, target, placer: str = "local_search",
                    options=None, *, cluster: Optional[Cluster] = None,
                    cost_model=None, seed: Optional[int] = None,
                    verify: Optional[VerifySettings] = None,
                    real_reward: Optional[RealRewardSettings] = None,
                    feeds=None, feed_options=None) -> Placement:
  """Places `graph`, verifies and/or fine-tunes it on `target`.

  Args:
    graph: the training step.
    target: a `LocalCluster`/`RemoteCluster`, the servers' cluster spec
      (`{"worker": ["host:port", ...]}`), "grpc://host:port" or "local".
    placer, options, cost_model, seed: as `tfplace.place`.
    cluster: the cluster to place on (default: the target's).
    verify: measure the placer's `top_k` best and the best heuristic, keep
      the measured best (None: no verification).
    real_reward: then fine-tune on measured step times (None: no): a search
      placer's or a heuristic's placement by `real_reward.algorithm`, a
      learned placer's by its simulator-trained policy (its `logdir`).
    feeds, feed_options: the graph's inputs (see `tfplace.measure`).

  Returns:
    The placement, its prediction recorded, with "verify" and/or
    "real_reward" in its metadata.

  Raises:
    MeasureError, ClusterError: a bad target or calibration, before any
      search (see `tfplace.real.target.check_target`).
  """
  placer_obj = get_placer(placer, options)
  if real_reward is not None and placer_obj.kind == PlacerKind.LEARNED:
    check_learned(placer_obj)  # Before any work.
  problem, resolved = checked_problem(graph, target, cluster, cost_model)
  if verify is not None:
    placement = verify_problem(problem, placer_obj, resolved, verify, seed,
                               feeds=feeds, feed_options=feed_options
                               ).placement
  else:
    placement = pipeline.run_placer(problem, placer_obj, seed).placement
  if real_reward is not None and not interrupts.interrupted():
    learned = placer_obj if placer_obj.kind == PlacerKind.LEARNED else None
    placement = fine_tune(problem, placement, resolved, real_reward, seed,
                          placer=learned, feeds=feeds,
                          feed_options=feed_options).placement
  result = pipeline.evaluate(problem, placement)  # its own placer named
  return pipeline.record_prediction(placement, problem.cluster, result)
