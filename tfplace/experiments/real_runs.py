"""Does checking the winners on real runs pay? The verify table.

For each graph, on a cluster of TF servers: a search on the simulator,
`verify_top_k` of its K best distinct placements against the best
heuristic, then a fresh confirmation: the returned placement and the best
heuristic measured again, interleaved, in rounds of their own (the
verification picked the fastest of several noisy measurements, so its own
figure for the winner is biased low; the confirmation is not). The target:
the returned placement is measured at least as fast as the best heuristic.

The real-reward row: from the simulator-only result (the search's best on
the simulator, what `tfplace place` returns without real runs) a fine-tune
on measured step times (`tfplace.real.fine_tune`) for a real-time budget,
then the fine-tuned placement against the simulator-only one and against
the best heuristic in fresh interleaved rounds.
"""

import dataclasses
import math
from typing import Optional, Tuple

from tfplace.measurement.config import MeasureConfig
from tfplace.models.registry import build_model
from tfplace.real.interleaved import measure_interleaved
from tfplace.real.target import resolve_target
from tfplace.placers.problem import PlacementProblem
from tfplace.real.fine_tune import RealRewardSettings, fine_tune
from tfplace.real.verify import VerifyResult, VerifySettings, verify_top_k

# Graphs whose steps take ~10-100 ms on one core, where the placement on
# two one-core workers matters.
GRAPHS = {
    "towers2": ("mlp_towers", dict(num_towers=2, num_layers=3, hidden=1024,
                                   batch_size=128, input_size=512)),
    "towers4": ("mlp_towers", dict(num_towers=4, num_layers=3, hidden=512,
                                   batch_size=128, input_size=256)),
    "small_cnn": ("small_cnn", dict(batch_size=32, image_size=64,
                                    channels=(32, 64, 64))),
    "resnet_like": ("resnet_like", dict(batch_size=8)),
}


@dataclasses.dataclass(frozen=True)
class VerifyRow:
  """One graph's verification and its confirmation.

  Attributes:
    graph: the GRAPHS name.
    num_ops: ops of the training step.
    heuristic: the best heuristic's placer.
    heuristic_predicted_s, heuristic_measured_s: its figures (verify).
    returned: the returned placement's label.
    returned_predicted_s, returned_measured_s: its figures (verify).
    verify_speedup: the heuristic's time / the returned one's (verify; the
      duel's when there was one).
    duel_ratio: the rounds' fastest / the heuristic in the duel (None: the
      heuristic was the fastest, no duel).
    spearman: the simulator's rank agreement over the candidates.
    predicted_best_is_measured_best: as the report says.
    confirm_ratio: returned / heuristic, in the confirmation rounds (1.0
      when they are the same placement).
    tolerance: the noise allowed by the target.
  """
  graph: str
  num_ops: int
  heuristic: str
  heuristic_predicted_s: Optional[float]
  heuristic_measured_s: Optional[float]
  returned: str
  returned_predicted_s: Optional[float]
  returned_measured_s: Optional[float]
  verify_speedup: Optional[float]
  duel_ratio: Optional[float]
  spearman: Optional[float]
  predicted_best_is_measured_best: Optional[bool]
  confirm_ratio: Optional[float]
  tolerance: float

  @property
  def met(self) -> bool:
    """The returned placement is at least as fast (within tolerance)."""
    return (self.confirm_ratio is not None
            and self.confirm_ratio <= 1.0 + self.tolerance)


def build_graph(name: str):
  model, config = GRAPHS[name]
  graph = build_model(model, **config)
  graph.name = name
  return graph


def confirm(graph, first, second, target, rounds: int,
            config: MeasureConfig, progress: bool = True) -> Optional[float]:
  """first / second measured in `rounds` fresh interleaved rounds (1.0 if
  they are the same placement; None if either never ran)."""
  if first.devices == second.devices:
    return 1.0
  times = measure_interleaved(graph, [first, second], resolve_target(target),
                              rounds, config, progress=progress,
                              desc=f"confirm {graph.name}")
  ratio = float(times.ratio_to(1)[0])
  return ratio if math.isfinite(ratio) else None


def verify_row(graph, servers, cluster, placer: str, options: dict,
               settings: VerifySettings, confirm_rounds: int,
               tolerance: float, seed: Optional[int] = 0
               ) -> Tuple[VerifyRow, VerifyResult]:
  """Searches, verifies and confirms one graph (see the module docstring);
  returns its row and the verification."""
  result = verify_top_k(graph, servers, placer, options, top_k=settings.top_k,
                        cluster=cluster, seed=seed, settings=settings)
  report = result.report
  ref, chosen = (report.candidates[report.reference],
                 report.candidates[report.chosen])
  ratio = confirm(graph, result.placement,
                  result.candidates[report.reference], servers,
                  confirm_rounds, settings.measure, settings.progress)
  return VerifyRow(
      graph.name, graph.num_ops, ref.label, ref.predicted_s, ref.measured_s,
      chosen.label, chosen.predicted_s, chosen.measured_s,
      report.speedup_over_heuristic, report.duel_ratio, report.spearman,
      report.predicted_best_is_measured_best, ratio, tolerance), result


@dataclasses.dataclass(frozen=True)
class RealRewardRow:
  """One graph's fine-tune on measured step times.

  Attributes:
    graph: the GRAPHS name.
    budget_s: the fine-tune's real-time budget.
    seconds: what it took.
    evaluations: placements the search scored (measured or looked up).
    measured: measurements made (references included).
    failed: placements that failed (a penalty each).
    drift: max / min of the start's medians during the fine-tune.
    improved: the fine-tune returned a placement other than its start (it
      won its own duel).
    duel_ratio: fine-tuned / start in the fine-tune's duel (None: no duel).
    vs_sim_only: fine-tuned / simulator-only in fresh rounds (1.0: the same
      placement).
    vs_heuristic: fine-tuned / the best heuristic in fresh rounds.
    confirmed, rejected: apparent improvements confirmed against the
      search's best so far, and how many lost (`MeasuredSettings`).
  """
  graph: str
  budget_s: float
  seconds: float
  evaluations: int
  measured: int
  failed: int
  drift: float
  improved: bool
  duel_ratio: Optional[float]
  vs_sim_only: Optional[float]
  vs_heuristic: Optional[float]
  confirmed: int = 0
  rejected: int = 0


def real_reward_row(graph, servers, cluster, verified: VerifyResult,
                    settings: RealRewardSettings, confirm_rounds: int,
                    measure: MeasureConfig, seed: Optional[int] = 0
                    ) -> RealRewardRow:
  """Fine-tunes the simulator-only result of `verified` on measured times
  and confirms it (see the module docstring)."""
  sim_only = verified.candidates[0]
  heuristic = verified.candidates[verified.report.reference]
  problem = PlacementProblem.build(graph, cluster)
  result = fine_tune(problem, sim_only, resolve_target(servers), settings,
                     seed)
  tuned = result.placement
  return RealRewardRow(
      graph.name, settings.budget_s, round(result.seconds, 1),
      result.search["evaluations"], result.measured, result.failed,
      round(result.drift, 3), result.improved, result.duel_ratio,
      confirm(graph, tuned, sim_only, servers, confirm_rounds, measure,
              settings.progress),
      confirm(graph, tuned, heuristic, servers, confirm_rounds, measure,
              settings.progress), result.confirmed, result.rejected)


def learned_reward_row(graph, servers, cluster, placer_name: str,
                       sim_budget_s: float, settings: RealRewardSettings,
                       confirm_rounds: int, measure: MeasureConfig,
                       heuristic, logdir: str,
                       seed: Optional[int] = 0) -> RealRewardRow:
  """A learned placer trained on the simulator for `sim_budget_s` (its
  checkpoint in `logdir`), its policy fine-tuned on measured times, then
  confirmed against its simulator-only result and `heuristic`."""
  from tfplace.pipeline import run_placer
  from tfplace.placers.registry import get_placer
  problem = PlacementProblem.build(graph, cluster)
  placer = get_placer(placer_name, {"budget_s": sim_budget_s,
                                    "logdir": logdir, "progress": False})
  sim_only = run_placer(problem, placer, seed).placement
  result = fine_tune(problem, sim_only, resolve_target(servers), settings,
                     seed, placer=placer)
  tuned = result.placement
  return RealRewardRow(
      f"{graph.name} ({placer_name})", settings.budget_s,
      round(result.seconds, 1), result.search["evaluations"],
      result.measured, result.failed, round(result.drift, 3),
      result.improved, result.duel_ratio,
      confirm(graph, tuned, sim_only, servers, confirm_rounds, measure,
              settings.progress),
      confirm(graph, tuned, heuristic, servers, confirm_rounds, measure,
              settings.progress), result.confirmed, result.rejected)
