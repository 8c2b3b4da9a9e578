"""Benchmark: check the winners on real runs (issue 11, `--verify_top_k`).

Starts a 2-worker local TF server cluster (one core each) and measures its
devices and links (the simulator predicts with the measured figures). For
each graph of --graphs (steps of ~10-100 ms on one core, see
`tfplace.experiments.real_runs.GRAPHS`): --placer searches the simulator for
--budget_s seconds, `verify_top_k` measures its --top_k best distinct
placements and the best heuristic in --rounds interleaved rounds and returns
the measured fastest (after a duel against the best heuristic in fresh
rounds); then the returned placement and the best heuristic are
measured again, alone, in --confirm_rounds fresh interleaved rounds. Prints
the table and, per graph, the target: the returned placement is measured at
least as fast as the best heuristic measured the same way (returned /
heuristic <= 1 + --tolerance, the noise allowed). With --json the last line
is one JSON object.

  python scripts/verify_table.py                      # ~3-5 minutes
  python scripts/verify_table.py --graphs towers2 --budget_s 5 --top_k 3

Measure it alone on the machine: other load moves step times by more than
the differences between placements.
"""

import dataclasses
import json
import sys
import time

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace import interrupts

interrupts.install("verify_table")  # Ctrl-C during the imports ends cleanly.

from absl import flags

from tfplace.cli.app_runner import run_app
from tfplace.errors import TfplaceError
from tfplace.experiments.real_runs import GRAPHS, verify_row
from tfplace.units import format_seconds

_GRAPHS = flags.DEFINE_list("graphs", list(GRAPHS), f"of {sorted(GRAPHS)}")
_PLACER = flags.DEFINE_string("placer", "local_search", "the search placer")
_BUDGET_S = flags.DEFINE_float("budget_s", 20.0, "seconds of search")
_TOP_K = flags.DEFINE_integer("top_k", 5, "candidates verified")
_ROUNDS = flags.DEFINE_integer("rounds", 3, "verification rounds")
_STEPS = flags.DEFINE_integer("steps", 5, "timed steps per placement and "
                              "round")
_CONFIRM = flags.DEFINE_integer("confirm_rounds", 4, "confirmation rounds")
_TOLERANCE = flags.DEFINE_float("tolerance", 0.03, "noise allowed by the "
                                "target (returned / heuristic <= 1 + this)")
_SEED = flags.DEFINE_integer("seed", 0, "search seed")
_JSON = flags.DEFINE_bool("json", False, "print the rows as JSON last")


def _settings():
  from tfplace.measurement.config import MeasureConfig
  from tfplace.real.verify import VerifySettings
  return VerifySettings(top_k=_TOP_K.value, rounds=_ROUNDS.value,
                        measure=MeasureConfig(warmup=2, steps=_STEPS.value),
                        progress=False)


def _time(x) -> str:
  return "—" if x is None else format_seconds(x)


def _ratio(x) -> str:
  return "—" if x is None else f"{x:.3f}"


def _table(rows) -> str:
  lines = ["| graph | ops | best heuristic: predicted / measured | returned: "
           "predicted / measured | duel ratio | speed-up (verify) | returned ÷ "
           "heuristic (confirm) | Spearman | predicted best = measured best | "
           "target |",
           "|---|---:|---|---|---:|---:|---:|---:|---|---|"]
  for r in rows:
    lines.append(
        f"| {r.graph} | {r.num_ops} | {r.heuristic}: "
        f"{_time(r.heuristic_predicted_s)} / {_time(r.heuristic_measured_s)} "
        f"| {r.returned}: {_time(r.returned_predicted_s)} / "
        f"{_time(r.returned_measured_s)} | {_ratio(r.duel_ratio)} | "
        f"{_ratio(r.verify_speedup)} | "
        f"{_ratio(r.confirm_ratio)} | {_ratio(r.spearman)} | "
        f"{r.predicted_best_is_measured_best} | "
        f"{'met' if r.met else 'NOT met'} |")
  return "\n".join(lines)


def main(argv):
  del argv
  unknown = sorted(set(_GRAPHS.value) - set(GRAPHS))
  if unknown:
    raise TfplaceError(f"unknown graphs {unknown}; choose from "
                       f"{sorted(GRAPHS)}")
  settings, rows, t0 = _settings(), [], time.perf_counter()
  options = {"budget_s": _BUDGET_S.value, "progress": False}
  with tfplace.LocalCluster(num_workers=2, benchmark=True) as servers:
    cluster = servers.to_cluster()
    for name in _GRAPHS.value:
      rows.append(verify_row(name, servers, cluster, _PLACER.value, options,
                             settings, _CONFIRM.value, _TOLERANCE.value,
                             _SEED.value))
      print(f"done {name} ({time.perf_counter() - t0:.0f} s)", flush=True)
  print(_table(rows))
  met = sum(r.met for r in rows)
  print(f"target (returned measured at least as fast as the best heuristic, "
        f"tolerance {_TOLERANCE.value:.0%}): met on {met}/{len(rows)} graphs")
  if _JSON.value:
    print(json.dumps({"rows": [dict(dataclasses.asdict(r), met=r.met)
                               for r in rows]}))


if __name__ == "__main__":
  run_app(main, sys.argv, "verify_table")
