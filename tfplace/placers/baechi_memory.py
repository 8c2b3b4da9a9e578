"""How much of the activations Baechi's placers charge, checked on the simulator.

Baechi's placers (m-TOPO, m-ETF, m-SCT) keep a device's memory by charging
each colocation group its parameters plus its outputs, every output as if
alive for the whole step (`tfplace.grouping.memory.MemoryBudget` with an
activation share of 1). That estimate is several times the real peak (~5x
on NMT), so where memory binds it turns fast placements away, or finds no
device for a group at all and overflows one. Inception-V3 on four GPUs of
0.4x its one-GPU peak (simulator, analytical costs): m-ETF 646 ms at share
1, 452 ms at share 0.5, both within memory.

With `activation_fraction` left unset (the default), a Baechi placer places
with share 1 first. If its budget turned a device away for memory, or the
simulator finds the placement over memory, it places again at the smaller
shares of `SHARES` and keeps the fastest placement the simulator finds
within memory (`memory_fraction` of each device). If none is, the ladder is
run again with the CPUs as candidates too (`use_cpu`), since a CPU's memory
is usually the largest. If no share fits either way, the share-1 placement
is returned (over memory, as before).

By default the budget also charges the tensors a device receives
(`BaechiOptions.charge_received`, `baechi_common.MemoryState`), which
Baechi's estimate leaves out; smaller shares alone cannot help where those
are what overflows: with RNNLM's GPUs at 0.6x its one-GPU peak (1.5 GB),
the variables' device receives 35 time steps of weight gradients (~2 GB)
for their sums and peaks at 2.3-2.4 GB at every share. Where memory binds,
Baechi's published placement (share 1, received tensors left out) is
placed and simulated too, so the default is never slower than it where it
fits. When memory does not bind, the result is the published algorithm's,
at the cost of one simulation.

A ladder stops early (see `_ladder`); at most 10 placer runs in all.
"""

import dataclasses
import math
from typing import Callable, List, Tuple

from absl import logging

from tfplace.placement import Placement
from tfplace.placers.problem import PlacementProblem

# The activation shares tried, largest first (1 is Baechi's estimate).
SHARES = (1.0, 0.75, 0.5, 0.35, 0.25, 0.125, 0.0)

# (problem, options with a share set) -> (placement, whether the memory
# budget turned a device away).
PlaceFn = Callable[[PlacementProblem, object], Tuple[Placement, bool]]


@dataclasses.dataclass(frozen=True)
class Attempt:
  """One placement at one share: its simulated step time (inf if it does
  not fit in `memory_fraction` of a device)."""
  share: float
  use_cpu: bool
  placement: Placement
  step_time_s: float
  charge_received: bool = True


def place_within_memory(problem: PlacementProblem, place: PlaceFn,
                        options) -> Placement:
  """The fastest placement, over the shares, that the simulator finds within
  memory (see the module docstring).

  Args:
    problem: the placement problem.
    place: places with given options (their `activation_fraction` set).
    options: the placer's `BaechiOptions`, `activation_fraction` None.
  """
  first, turned_away = place(
      problem, dataclasses.replace(options, activation_fraction=SHARES[0]))
  first_time = _fitting_step_time(problem, first, options.memory_fraction)
  if not turned_away and math.isfinite(first_time):
    return first
  tried = [Attempt(SHARES[0], options.use_cpu, first, first_time,
                   options.charge_received)]
  if options.charge_received:
    # Baechi's own estimate is a candidate too, so the default is never
    # slower than the published placement where that fits.
    published, _ = place(problem, dataclasses.replace(
        options, activation_fraction=SHARES[0], charge_received=False))
    tried.append(Attempt(SHARES[0], options.use_cpu, published,
                         _fitting_step_time(problem, published,
                                            options.memory_fraction), False))
  if turned_away:
    fits = math.isfinite(first_time)
    tried += _ladder(problem, place, options, options.use_cpu, SHARES[1:],
                     found=fits, misses=0 if fits else 1)
  if not any(math.isfinite(a.step_time_s) for a in tried) and (
      not options.use_cpu and _has_cpu_and_accelerator(problem)):
    tried += _ladder(problem, place, options, True, SHARES, found=False)
  best = min(tried, key=lambda a: a.step_time_s)
  name = first.metadata.placer
  if not math.isfinite(best.step_time_s):
    logging.warning("%s: no activation share gives a placement within "
                    "memory; keeping Baechi's (share 1)", name)
    return first
  logging.info("%s: activation share %g%s: %.3f ms within memory (share 1: "
               "%s)", name, best.share,
               " with the CPUs" if best.use_cpu != options.use_cpu else "",
               best.step_time_s * 1e3,
               f"{first_time * 1e3:.3f} ms" if math.isfinite(first_time)
               else "over memory")
  chosen = {"activation_fraction": best.share, "use_cpu": best.use_cpu,
            "charge_received": best.charge_received,
            "shares_tried": len(tried)}
  return best.placement.with_metadata(
      extra=dict(best.placement.metadata.extra, memory_share=chosen))


def _ladder(problem: PlacementProblem, place: PlaceFn, options,
            use_cpu: bool, shares, found: bool, misses: int = 0
            ) -> List[Attempt]:
  """Places at each share in turn.

  Stops at the first share over memory once one within memory is found, or
  at the second in a row before that (`misses`: how many were over memory
  already; smaller shares pack devices fuller, so where share 1 overflowed
  Baechi's estimate was not what bound), and after a share at which the
  budget turned no device away (the placers are deterministic, and a smaller
  share only loosens a budget that never bound, so it would place the
  same)."""
  out = []
  for share in shares:
    placement, turned_away = place(problem, dataclasses.replace(
        options, activation_fraction=share, use_cpu=use_cpu))
    step = _fitting_step_time(problem, placement, options.memory_fraction)
    out.append(Attempt(share, use_cpu, placement, step,
                       options.charge_received))
    if math.isfinite(step):
      found = True
    elif found or misses == 1:
      break
    else:
      misses += 1
    if not turned_away:
      break
  return out


def _fitting_step_time(problem: PlacementProblem, placement: Placement,
                       memory_fraction: float) -> float:
  """Simulated step time, inf if a device's peak is over `memory_fraction`
  of its memory."""
  result = problem.simulator.simulate(
      placement.to_array(problem.graph, problem.cluster))
  capacity = result.memory_capacity_bytes * memory_fraction
  if not result.feasible or (result.peak_memory_bytes > capacity).any():
    return math.inf
  return float(result.step_time_s)


def _has_cpu_and_accelerator(problem: PlacementProblem) -> bool:
  types = {d.type for d in problem.cluster.devices}
  return "CPU" in types and len(types) > 1
