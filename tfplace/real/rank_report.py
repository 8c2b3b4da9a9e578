"""What a verification on real runs found: predicted vs measured, per
candidate, and how well the simulator ranked them.

Built from the candidates' predictions and their interleaved measurement
(`tfplace.real.interleaved`): each candidate's measured median, its ratio
to the best heuristic measured in the same rounds, the simulator's rank
error (Spearman's rho between predicted and measured, and whether the
candidate predicted fastest was measured fastest) and the measured speed-up
of the returned placement over the best heuristic.
"""

import dataclasses
import math
from typing import Optional, Sequence, Tuple

import numpy as np

from tfplace.real.interleaved import InterleavedTimes
from tfplace.units import format_seconds


@dataclasses.dataclass(frozen=True)
class CandidateResult:
  """One measured placement.

  Attributes:
    label: e.g. "local_search #2" or "best heuristic (m_etf)".
    predicted_s: the simulated step time (None: infeasible).
    measured_s: the median over rounds of its round medians (None: every
      round failed).
    ratio: measured / the best heuristic's, within rounds (None: unknown).
    rounds_ok: rounds in which it was measured.
    errors: why the other rounds failed.
  """
  label: str
  predicted_s: Optional[float]
  measured_s: Optional[float]
  ratio: Optional[float]
  rounds_ok: int
  errors: Tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class VerifyReport:
  """The verification of one search's candidates on a target.

  Attributes:
    candidates: the placements measured, in the simulator's order, the best
      heuristic among them (at `reference`).
    reference: index of the best heuristic.
    chosen: index of the placement returned (the measured fastest).
    spearman: rho of predicted vs measured over the measured candidates
      (None: fewer than 3, or no spread).
    predicted_best_is_measured_best: whether the candidate predicted
      fastest is the one measured fastest (None: nothing measured).
    speedup_over_heuristic: the best heuristic's time / the returned
      placement's, within rounds (None: one of them was not measured).
    rounds: interleaved rounds asked for.
    target: where it ran.
    stopped: why measuring stopped early (None: it did not).
    duel_candidate: the candidate measured fastest in the rounds, when it
      was not the best heuristic and was measured again against it (None:
      no duel).
    duel_ratio: its time / the best heuristic's in the duel's fresh rounds
      (it is returned only if this is below 1; None: no duel, or the duel
      failed).
  """
  candidates: Tuple[CandidateResult, ...]
  reference: int
  chosen: int
  spearman: Optional[float]
  predicted_best_is_measured_best: Optional[bool]
  speedup_over_heuristic: Optional[float]
  rounds: int
  target: str
  stopped: Optional[str] = None
  duel_candidate: Optional[int] = None
  duel_ratio: Optional[float] = None

  def to_dict(self) -> dict:
    """JSON-ready (placement metadata "verify")."""
    return dataclasses.asdict(self)

  @classmethod
  def from_dict(cls, data: dict) -> "VerifyReport":
    data = dict(data)
    data["candidates"] = tuple(
        CandidateResult(**dict(c, errors=tuple(c.get("errors", ()))))
        for c in data["candidates"])
    return cls(**data)

  def describe(self) -> str:
    """A readable table and the summary lines."""
    width = max(len(c.label) for c in self.candidates)
    n, rounds = len(self.candidates), self.rounds
    lines = [f"verified {n} placement{'s' if n != 1 else ''} on "
             f"{self.target}, {rounds} interleaved round"
             f"{'s' if rounds != 1 else ''}:",
             f"  {'':2}{'placement':{width}} {'predicted':>12} "
             f"{'measured':>12} {'÷ heuristic':>12}"]
    for i, c in enumerate(self.candidates):
      mark = "*" if i == self.chosen else " "
      lines.append(f"  {mark} {c.label:{width}} {_time(c.predicted_s):>12} "
                   f"{_time(c.measured_s):>12} {_ratio(c.ratio):>12}"
                   + (f"  failed: {c.errors[-1]}" if c.errors else ""))
    if self.duel_candidate is not None:
      kept = self.chosen == self.duel_candidate
      lines.append(f"  duel: {self.candidates[self.duel_candidate].label} ÷ "
                   f"the best heuristic in fresh rounds "
                   f"{_ratio(self.duel_ratio)}: "
                   f"{'kept' if kept else 'not faster, the heuristic kept'}")
    lines.append(f"  returned: {self.candidates[self.chosen].label} (*); "
                 f"speed-up over the best heuristic "
                 f"{_speedup(self.speedup_over_heuristic)}")
    rho = "n/a" if self.spearman is None else f"{self.spearman:.3f}"
    lines.append(f"  simulator rank: Spearman {rho}; predicted best was the "
                 f"measured best: {_yes(self.predicted_best_is_measured_best)}")
    if self.stopped:
      lines.append(f"  stopped early: {self.stopped}")
    return "\n".join(lines)


def _time(x: Optional[float]) -> str:
  return "—" if x is None else format_seconds(x)


def _ratio(x: Optional[float]) -> str:
  return "—" if x is None else f"{x:.3f}"


def _speedup(x: Optional[float]) -> str:
  return "unknown (not measured)" if x is None else f"{x:.3f}x"


def _yes(x: Optional[bool]) -> str:
  return "n/a" if x is None else ("yes" if x else "no")


def _number(x: float) -> Optional[float]:
  return float(x) if x is not None and math.isfinite(x) else None


def build_report(labels: Sequence[str], predicted: Sequence[float],
                 times: InterleavedTimes, reference: int, rounds: int,
                 target: str) -> VerifyReport:
  """The report of `times` (placements in `labels` order).

  The returned placement is the fastest within rounds relative to the
  reference (raw medians where the reference never ran; the first, the
  simulator's pick, when nothing ran).
  """
  ratios, measured = times.ratio_to(reference), times.measured_s
  score = ratios if np.isfinite(ratios).any() else measured
  ok = np.flatnonzero(np.isfinite(score))
  chosen = int(ok[np.argmin(score[ok])]) if len(ok) else 0
  candidates = tuple(
      CandidateResult(labels[i], _number(predicted[i]), _number(measured[i]),
                      _number(ratios[i]),
                      int(np.isfinite(times.round_medians_s[i]).sum()),
                      times.errors[i]) for i in range(len(labels)))
  rho, same = rank_agreement(np.asarray(predicted, float), score)
  speedup = (_number(1.0 / ratios[chosen])
             if np.isfinite(ratios[chosen]) else None)
  return VerifyReport(candidates, reference, chosen, rho, same, speedup,
                      rounds, target, times.stopped)


def rank_agreement(predicted: np.ndarray, measured: np.ndarray
                   ) -> Tuple[Optional[float], Optional[bool]]:
  """(Spearman rho, predicted best is measured best) over the placements
  with both figures finite."""
  ok = np.isfinite(predicted) & np.isfinite(measured)
  if not ok.any():
    return None, None
  p, m = predicted[ok], measured[ok]
  same = bool(np.argmin(p) == np.argmin(m))
  if ok.sum() < 3 or np.ptp(p) == 0 or np.ptp(m) == 0:
    return None, same
  from scipy import stats  # Lazy: scipy is slow to import.
  return float(stats.spearmanr(p, m)[0]), same


def with_duel(report: VerifyReport, times: InterleavedTimes) -> VerifyReport:
  """`report` after its chosen candidate (index 0 of `times`) was measured
  again against the best heuristic (index 1) in fresh rounds: it stays
  chosen only if faster there; the speed-up is the duel's (independent of
  the pick, so not biased by it)."""
  ratio = _number(float(times.ratio_to(1)[0]))
  candidate = report.chosen
  keep = ratio is not None and ratio < 1.0
  return dataclasses.replace(
      report, duel_candidate=candidate, duel_ratio=ratio,
      chosen=candidate if keep else report.reference,
      speedup_over_heuristic=1.0 / ratio if keep else 1.0,
      stopped=report.stopped or times.stopped)
