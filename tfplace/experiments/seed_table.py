"""The seed paper's running-time table, reproduced on the simulator.

Mirhoseini et al. (ICML 2017), "Running times (in seconds)": rows are model x
number of GPUs (RNNLM, NMT, Inception-V3 on 2 and 4 K80s); columns are the
baselines (single CPU, single GPU, Scotch, METIS min-cut, expert), here
joined by Baechi's m-TOPO, m-ETF and m-SCT, the Learned column, and the
lower bound max(critical path, work / devices). Each cell is the simulated
step time of the placer's placement ("OOM" if it does not fit), and each
placer's own running time (placement time) is reported beside it. Search
placers (issue 9) add columns: each starts from the row's best one-pass
placement and searches for `budget_s` seconds. Learned placers (issue 10)
start from the same placement and search for `learned_budget_s` seconds;
the Learned column shows the fastest of them (blank without them).
"""

import dataclasses
import json
import time
from typing import Dict, List, Mapping, Sequence, Tuple

from absl import logging
from tqdm.auto import tqdm

from tfplace.errors import TfplaceError
from tfplace.experiments.compare_placers import (PlacerComparison,
                                                  compare_with_searches)
from tfplace.io_utils import json_number
from tfplace.pipeline import PlacerRun

DEFAULT_MODELS = ("rnnlm", "nmt", "inception_v3")
DEFAULT_GPUS = (2, 4)
DEFAULT_PLACERS = ("single_cpu", "single_gpu", "scotch", "metis", "expert",
                   "m_topo", "m_etf", "m_sct")
# Reduced model sizes for quick runs (fewer unrolled steps, smaller layers).
QUICK_OVERRIDES: Mapping[str, Mapping[str, object]] = {
    "rnnlm": {"num_steps": 6, "hidden": 256, "vocab": 2000},
    "nmt": {"src_len": 6, "tgt_len": 6, "hidden": 256, "num_layers": 2,
            "src_vocab": 2000, "tgt_vocab": 2000},
    "inception_v3": {"batch_size": 8, "image_size": 75,
                     "depth_multiplier": 0.25},
}
_COLUMN_TITLES = {
    "single_cpu": "Single-CPU", "single_gpu": "Single-GPU", "scotch": "Scotch",
    "metis": "METIS", "expert": "Expert", "m_topo": "m-TOPO", "m_etf": "m-ETF",
    "m_sct": "m-SCT", "multi_objective": "Multi-objective",
    "local_search": "Local search", "cross_entropy": "Cross-entropy",
    "cp_sat": "CP-SAT",
}
DEFAULT_SEARCH_BUDGET_S = 10.0
DEFAULT_LEARNED_BUDGET_S = 300.0


@dataclasses.dataclass(frozen=True)
class TableConfig:
  """What to run.

  Attributes:
    models: model names for `tfplace.models.registry.build_model`.
    gpus: GPU counts; each maps to the cluster preset "k80x<N>".
    placers: placer names for `tfplace.placers.registry.get_placer`.
    searches: search placers, each started from the row's best placer.
    budget_s: seconds each search may take.
    overrides: per model, config fields passed to `build_model`.
    learned: learned placers (e.g. "colocrl") for the Learned column, which
      shows the fastest of them; each starts from the row's best placer.
    learned_budget_s: seconds each learned search may take.
    placer_options: per search or learned placer, more options (agent...).
  """
  models: Tuple[str, ...] = DEFAULT_MODELS
  gpus: Tuple[int, ...] = DEFAULT_GPUS
  placers: Tuple[str, ...] = DEFAULT_PLACERS
  searches: Tuple[str, ...] = ()
  budget_s: float = DEFAULT_SEARCH_BUDGET_S
  overrides: Mapping[str, Mapping[str, object]] = dataclasses.field(
      default_factory=dict)
  learned: Tuple[str, ...] = ()
  learned_budget_s: float = DEFAULT_LEARNED_BUDGET_S
  placer_options: Mapping[str, Mapping[str, object]] = dataclasses.field(
      default_factory=dict)

  def later_options(self) -> Dict[str, Dict[str, object]]:
    """Per search and learned placer: its budget and more options."""
    budgets = {**{name: self.budget_s for name in self.searches},
               **{name: self.learned_budget_s for name in self.learned}}
    return {name: {"budget_s": budget,
                   **dict(self.placer_options.get(name, {}))}
            for name, budget in budgets.items()}


@dataclasses.dataclass(frozen=True)
class Row:
  """One (model, #GPUs) row: every placer's run on the k80x<N> cluster."""
  model: str
  num_gpus: int
  comparison: PlacerComparison
  learned_names: Tuple[str, ...] = ()

  @property
  def cluster(self) -> str:
    return self.comparison.cluster_name

  @property
  def num_ops(self) -> int:
    return self.comparison.num_ops

  @property
  def lower_bound_s(self) -> float:
    return self.comparison.lower_bound_s

  @property
  def cells(self) -> Tuple[PlacerRun, ...]:
    """The baseline placers' runs (learned ones are in `learned`)."""
    return tuple(r for r in self.comparison.runs
                 if r.placer not in self.learned_names)

  @property
  def learned(self) -> Tuple[PlacerRun, ...]:
    return tuple(r for r in self.comparison.runs
                 if r.placer in self.learned_names)

  @property
  def learned_text(self) -> str:
    """The Learned cell: the fastest learned run, "" if none ran."""
    runs = [r for r in self.learned if r.feasible]
    if not runs:
      return self.learned[0].text if self.learned else ""
    best = min(runs, key=lambda r: r.step_time_s)
    return f"{best.text} ({best.placer})"


@dataclasses.dataclass(frozen=True)
class SeedTable:
  """The whole table."""
  placers: Tuple[str, ...]
  rows: Tuple[Row, ...]

  def to_markdown(self) -> str:
    """The table as Markdown: step times, then placement times."""
    titles = [_COLUMN_TITLES.get(p, p) for p in self.placers]
    head = (["Model", "#GPUs", "ops"] + titles + ["Learned", "Lower bound"] +
            [f"t({t})" for t in titles])
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join(["---"] * len(head)) + "|"]
    for row in self.rows:
      cells = ([row.model, str(row.num_gpus), str(row.num_ops)] +
               [c.text for c in row.cells] +
               [row.learned_text, f"{row.lower_bound_s:.4g}"] +
               [f"{c.placement_time_s:.2f}" for c in row.cells])
      lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Step times are simulated seconds per training step "
                 "(OOM: does not fit in memory); t(...) is each placer's "
                 "running time in seconds.")
    return "\n".join(lines) + "\n"

  def to_dict(self) -> dict:
    number = json_number
    return {
        "placers": list(self.placers),
        "rows": [{
            "model": r.model, "num_gpus": r.num_gpus, "cluster": r.cluster,
            "num_ops": r.num_ops, "lower_bound_s": number(r.lower_bound_s),
            "cells": [{"placer": c.placer, "step_time_s": number(c.step_time_s),
                       "feasible": c.feasible,
                       "placement_time_s": c.placement_time_s,
                       "error": c.error} for c in r.comparison.runs],
        } for r in self.rows],
    }

  def to_json(self) -> str:
    return json.dumps(self.to_dict(), indent=1)


def run_seed_table(config: TableConfig = TableConfig(),
                   progress: bool = True) -> SeedTable:
  """Builds each model once, then places and simulates it per cluster.

  Args:
    config: models, GPU counts, placers and model-size overrides.
    progress: show a tqdm bar over (model, #GPUs, placer) runs.

  Returns:
    The table.

  Raises:
    TfplaceError: unknown model, cluster or placer name.
  """
  from tfplace.placers.registry import get_placer
  for name in config.placers:
    get_placer(name)  # Fail fast on an unknown placer name.
  for name, options in config.later_options().items():
    get_placer(name, options)
  rows: List[Row] = []
  columns = tuple(config.placers) + tuple(config.searches)
  total = len(config.models) * len(config.gpus) * (
      len(columns) + len(config.learned))
  with tqdm(total=total, disable=not progress, desc="seed table") as bar:
    for model in config.models:
      graph = _build(model, config.overrides.get(model, {}))
      for num_gpus in config.gpus:
        rows.append(_run_row(graph, model, num_gpus, config, bar))
  return SeedTable(placers=columns, rows=tuple(rows))


def _build(model: str, overrides: Mapping[str, object]):
  from tfplace.models.registry import build_model
  start = time.perf_counter()
  graph = build_model(model, **dict(overrides))
  logging.info("built %s: %d ops, %d edges in %.1f s", model, graph.num_ops,
               graph.num_edges, time.perf_counter() - start)
  return graph


def _run_row(graph, model: str, num_gpus: int, config: TableConfig,
             bar) -> Row:
  """Costs, lower bound and every placer's run for one cluster (the
  search and learned placers start from the best of the others)."""
  from tfplace.cost.presets import load_cluster
  bar.set_postfix_str(f"{model} x{num_gpus}")
  comparison = compare_with_searches(
      graph, load_cluster(f"k80x{num_gpus}"), config.placers,
      tuple(config.searches) + tuple(config.learned), config.budget_s,
      progress=False, search_options=config.later_options())
  bar.update(len(config.placers) + len(config.searches) + len(config.learned))
  return Row(model=model, num_gpus=num_gpus, comparison=comparison,
             learned_names=tuple(config.learned))


def parse_overrides(model: str, items: Sequence[str]) -> Dict[str, object]:
  """Parses "field=value" strings (ints, floats, booleans) for one model."""
  out: Dict[str, object] = {}
  for item in items:
    key, sep, value = item.partition("=")
    if not sep or not key:
      raise TfplaceError(f"bad override {item!r} for {model}: use field=value")
    out[key.strip()] = _parse_value(value.strip())
  return out


def _parse_value(text: str):
  if text.lower() in ("true", "false"):
    return text.lower() == "true"
  for kind in (int, float):
    try:
      return kind(text)
    except ValueError:
      pass
  return text
