"""Does a GDP policy trained on other graphs help on a new one?

GDP (Zhou et al., 2019) claims a policy trained on some graphs places
unseen ones well at once (zero-shot) and reaches good placements sooner when
fine-tuned. Measured here, per seed: a `gdp` search from fresh weights on
every target graph and every single-graph source (its network saved in its
logdir), and GDP's batch training on every source that is a set of graphs
("a+b+c": one policy trained on all of them at once, `GDPPlacer.
train_on_graphs`, for the search budget times the number of graphs); then
for each (source, target) pair:

  * zero-shot: the policy with the source's weights on the target graph,
    before any training on it: its most likely placement (the mode) and
    `samples` sampled placements (best and median), each simulated; and the
    same for fresh weights;
  * fine-tuned: a `gdp` search on the target from the source's weights,
    with the same budget and options as the fresh search on the target.

Step times are simulated on the preset cluster; the best heuristic (the
searches' start) is the reference.
"""

import dataclasses
import os
import statistics
from typing import Dict, List, Sequence, Tuple

import numpy as np


@dataclasses.dataclass(frozen=True)
class ZeroShot:
  """A policy's placements before training: mode, best and median sample."""
  mode_s: float
  best_s: float
  median_s: float


@dataclasses.dataclass(frozen=True)
class TransferRow:
  """One (source, target, seed) of the table (step times in seconds)."""
  target: str
  source: str
  seed: int
  best_heuristic_s: float
  zero_shot_pretrained: ZeroShot
  zero_shot_fresh: ZeroShot
  fine_tuned_s: float
  fresh_s: float
  fine_tuned_samples: int
  fresh_samples: int


def zero_shot(setup, samples: int, seed: int) -> ZeroShot:
  """Simulates the mode and `samples` samples of `setup`'s policy as built
  (no training, no warm start)."""
  import tensorflow as tf
  codec, evaluator = setup.env.codec, setup.env.evaluator
  obs = {"allowed": tf.constant(codec.allowed[None])}
  dist, _ = setup.actor_net(obs)
  mode = dist.mode().numpy()  # [1, U]
  drawn = dist.sample(samples, seed=seed).numpy()[:, 0]  # [N, U]
  times, _ = evaluator.evaluate(codec.decode(np.concatenate([mode, drawn])))
  return ZeroShot(float(times[0]), float(np.min(times[1:])),
                  float(np.median(times[1:])))


SET_SEPARATOR = "+"


def source_graphs(source: str) -> List[str]:
  """The graphs of a source: "a" or a set "a+b+c"."""
  return source.split(SET_SEPARATOR)


def _batch_train(problems, names: Sequence[str], options: Dict[str, object],
                 logdir: str, seed: int) -> None:
  """GDP's batch training on `names`, its network saved under `logdir`."""
  from tfplace.placers.registry import get_placer
  placer = get_placer("gdp", {
      **options, "init": "best_heuristic", "logdir": logdir,
      "budget_s": float(options["budget_s"]) * len(names)})
  placer.train_on_graphs({n: problems[n] for n in names}, seed=seed)


def _search(problem, options: Dict[str, object], seed: int):
  """A gdp search; returns (best step time, samples)."""
  from tfplace.pipeline import run_placer
  from tfplace.placers.registry import get_placer
  run = run_placer(problem, get_placer("gdp", options), seed=seed)
  return run.step_time_s, run.placement.metadata.extra["search"]["samples"]


def _policy_zero_shot(problem, start, options, samples, seed) -> ZeroShot:
  from tfplace.placers.learned_common import env_config
  from tfplace.placers.registry import get_placer
  placer = get_placer("gdp", options)
  return zero_shot(placer.setup(problem, start, env_config(placer.options)),
                   samples, seed)


def transfer_table(problems: Dict[str, object],
                   pairs: Sequence[Tuple[str, str]], seeds: Sequence[int],
                   options: Dict[str, object], out_dir: str,
                   samples: int = 256, report=print) -> List[TransferRow]:
  """The table of the module docstring.

  Args:
    problems: graph name -> `PlacementProblem` (one cluster for all).
    pairs: (source, target): graph names; a source may be a set "a+b" (the
      target not among them).
    seeds: one fresh search per graph and seed, one batch training per
      source set and seed, one fine-tune per pair.
    options: gdp options of every search (budget_s, agent, ...).
    out_dir: the searches' logdirs go under out_dir/logs/.
    samples: zero-shot samples per policy.
    report: called with each row as it is done.
  """
  from tfplace.placers.search_support import start_placement
  singles = sorted({n for pair in pairs for n in pair
                    if SET_SEPARATOR not in n})
  sets = sorted({s for s, _ in pairs if SET_SEPARATOR in s})
  # The graphs searched alone (targets, single sources); a set's graphs
  # find their best heuristic in the batch training.
  starts = {name: start_placement(problems[name], "best_heuristic")
            for name in singles}
  # Each search starts from its graph's best heuristic, run by name (not
  # every heuristic again).
  base = {name: {**options, "init": start.source.split(" ")[0],
                 "restart": True, "progress": False}
          for name, start in starts.items()}
  rows = []
  for seed in seeds:
    fresh, trained = {}, {}
    for name in singles:
      logdir = os.path.join(out_dir, "logs", f"{name}_fresh_s{seed}")
      fresh[name] = (logdir, *_search(problems[name],
                                      {**base[name], "logdir": logdir}, seed))
      trained[name] = logdir
    for source in sets:
      trained[source] = os.path.join(out_dir, "logs",
                                     f"{source}_batch_s{seed}")
      _batch_train(problems, source_graphs(source),
                   {**options, "restart": True, "progress": False},
                   trained[source], seed)
    for source, target in pairs:
      problem, start = problems[target], starts[target]
      pretrained = {**base[target], "pretrained": trained[source]}
      tuned_s, tuned_samples = _search(problem, {
          **pretrained, "logdir": os.path.join(
              out_dir, "logs", f"{target}_from_{source}_s{seed}")}, seed)
      row = TransferRow(
          target=target, source=source, seed=seed,
          best_heuristic_s=start.step_time_s,
          zero_shot_pretrained=_policy_zero_shot(problem, start, pretrained,
                                                 samples, seed),
          zero_shot_fresh=_policy_zero_shot(problem, start, base[target],
                                            samples, seed),
          fine_tuned_s=tuned_s, fresh_s=fresh[target][1],
          fine_tuned_samples=tuned_samples, fresh_samples=fresh[target][2])
      rows.append(row)
      report(row)
  return rows


def markdown(rows: Sequence[TransferRow]) -> List[str]:
  """The rows as a markdown table, then the medians over seeds per pair."""
  def shot(z):
    return f"{z.mode_s:.4g} / {z.best_s:.4g} / {z.median_s:.4g}"
  lines = [
      "| target | source | seed | best heuristic | zero-shot, source's "
      "weights (mode / best / median) | zero-shot, fresh weights | "
      "fine-tuned from source | fresh search | fine-tuned vs fresh |",
      "|---|---|---:|---:|---|---|---:|---:|---:|"]
  for r in rows:
    lines.append(
        f"| {r.target} | {r.source} | {r.seed} | {r.best_heuristic_s:.4g} | "
        f"{shot(r.zero_shot_pretrained)} | {shot(r.zero_shot_fresh)} | "
        f"{r.fine_tuned_s:.4g} | {r.fresh_s:.4g} | "
        f"{100 * (r.fine_tuned_s / r.fresh_s - 1):+.1f} % |")
  pairs = sorted({(r.target, r.source) for r in rows})
  lines += ["", "| target | source | seeds | median fine-tuned | median fresh "
            "| median zero-shot mode, source's / fresh |",
            "|---|---|---:|---:|---:|---|"]
  for target, source in pairs:
    mine = [r for r in rows if (r.target, r.source) == (target, source)]
    med = lambda f: statistics.median(f(r) for r in mine)  # noqa: E731
    lines.append(
        f"| {target} | {source} | {len(mine)} | "
        f"{med(lambda r: r.fine_tuned_s):.4g} | {med(lambda r: r.fresh_s):.4g}"
        f" | {med(lambda r: r.zero_shot_pretrained.mode_s):.4g} / "
        f"{med(lambda r: r.zero_shot_fresh.mode_s):.4g} |")
  return lines
