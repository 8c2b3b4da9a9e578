"""Baechi's placers where memory binds (simulator; no cluster needed).

Each graph's accelerators are shrunk to fractions of its one-accelerator
simulated peak; m_topo, m_etf and m_sct place with Baechi's published
memory estimate (every activation alive at once, received tensors left
out), with smaller shares checked on the simulator (received tensors left
out), and with the default, which also charges received tensors
(`tfplace.placers.baechi_memory`). Prints per graph, memory size and placer
the three simulated step times, the share kept and the placers' wall time.
--json: the last line is a JSON list of the rows.
"""

import dataclasses
import json
import sys

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.cli.app_runner import run_app, start_script

start_script("memory_pressure")  # Ctrl-C, TF's start-up lines: from here.

from absl import flags

from tfplace.models.registry import list_models

_GRAPHS = flags.DEFINE_list("graphs", ["inception_v3", "nmt"],
                            "benchmark models (tfplace.models.registry)")
_CLUSTER = flags.DEFINE_string("cluster", "k80x4", "cluster preset or JSON")
_FRACTIONS = flags.DEFINE_list(
    "fractions", ["1", "0.6", "0.4", "0.25"], "accelerator memory as "
    "fractions of the graph's simulated one-accelerator peak")
_JSON = flags.DEFINE_bool("json", False, "end with a JSON line")


def _positive_floats(values) -> bool:
  try:
    return bool(values) and all(float(v) > 0 for v in values)
  except ValueError:
    return False


flags.register_validator(
    "graphs", lambda v: bool(v) and set(v) <= set(list_models()),
    message=f"--graphs: one or more of {list_models()}")
flags.register_validator(
    "fractions", _positive_floats,
    message="--fractions: numbers > 0 (fractions of the one-GPU peak), "
    "e.g. 1,0.6,0.4")


def main(argv):
  del argv
  from tfplace.cost.presets import load_cluster
  from tfplace.experiments.memory_pressure import format_ms, pressure_rows
  from tfplace.models.registry import build_model
  cluster = load_cluster(_CLUSTER.value)
  fractions = [float(f) for f in _FRACTIONS.value]
  rows = []
  print("| graph | memory / one-GPU peak | placer | published ms | shares, "
        "received left out ms | default ms | share kept | with CPUs | placer "
        "s (published / default) |\n|---|---:|---|---:|---:|---:|---:|---|"
        "---:|", flush=True)
  for name in _GRAPHS.value:
    for r in pressure_rows(build_model(name), cluster, fractions):
      rows.append(r)
      print(f"| {r.graph} | {r.memory_fraction_of_peak:g} | {r.placer} | "
            f"{format_ms(r.published_s)} | {format_ms(r.shares_only_s)} | "
            f"{format_ms(r.default_s)} | "
            f"{r.share:g} | {'yes' if r.use_cpu else 'no'} | "
            f"{r.published_time_s:.1f} / {r.default_time_s:.1f} |",
            flush=True)
  if _JSON.value:
    print(json.dumps([dataclasses.asdict(r) for r in rows]))


if __name__ == "__main__":
  run_app(main, sys.argv, "memory_pressure")
