"""place a graph on a cluster with a placer.

usage: tfplace place GRAPH --cluster CLUSTER --placer NAME
                     [--placer_options key=value,...] --out placement.json
                     [--budget_s S] [--init best_heuristic|PLACER|p.json]
                     [--seed N] [--cost_model NAME] [--loop_trip_counts L=N]
                     [--calibration calibration.json] [--allow_infeasible]
                     [--batch_size N] [--input_shapes name=DxD,...]
                     [--verify_top_k K --target STATE|SPEC|grpc://...|local
                      [--verify_rounds 3] [--verify_steps 5]]
                     [--real_reward --target T [--real_budget_s 300]
                      [--real_algorithm local_search|cross_entropy]
                      [--real_confirm_rounds 2]]
                     [--json]
       tfplace place GRAPH --cluster CLUSTER
                     --placer colocrl|hierarchical|placeto|gdp|mars
                     [--agent reinforce|ppo] [--budget_s S] [--max_samples N]
                     [--logdir DIR [--resume]] --out placement.json

Reads GRAPH (a .pb/.pbtxt GraphDef, a .meta MetaGraphDef, or a saved,
compiled Keras model: .keras, .h5 or a SavedModel folder), computes op
costs with --cost_model (default: analytical, or calibrated when
--calibration is given; a calibration also calibrates the cluster's links and
overheads), runs the placer through the pipeline (costs, groups, place,
validate, simulate), writes the placement JSON (atomically) and prints the
predicted step time. A placement that does not fit in memory is an error
(exit 2, nothing written) unless --allow_infeasible.

Search placers (local_search, cross_entropy, cp_sat) and learned placers
(colocrl, hierarchical, placeto, gdp, mars) take --budget_s and --init (their budget_s
and init options) and show a progress bar with the best step time; Ctrl-C
stops the search, writes the best placement found so far (a complete JSON)
and exits with status 130. The learned placers' main options have flags of
their own too (--agent, --max_samples, --logdir, --resume). Each such flag
sets the placer option of the same name (the flag wins over
--placer_options). With --logdir a learned search writes checkpoints,
TensorBoard curves and its best placement so far (JSON and placed GraphDef)
there; --resume continues a killed search.

--verify_top_k K --target T checks the winners on real runs: the placer's K
best distinct placements and the best heuristic are measured on T (TF servers:
the state file or cluster spec given to --cluster, or grpc://host:port; or
local: this process, on the /job:localhost devices of --cluster, e.g.
--cluster local) in interleaved rounds and the measured fastest is written,
with a report of predicted vs measured step times, the simulator's rank error
and the measured speed-up over the best heuristic (metadata "verify"). An
unreachable target, a cluster that is not the target's or a calibration made
for another cluster is an error before any search (exit 2, nothing written); a
worker that dies during the rounds fails its sample and stops them, and the
best measured placement is written.

--real_reward (with --target) then fine-tunes the placement on measured step
times for --real_budget_s seconds, starting from it (metadata
"real_reward"); the fine-tuned placement is written only if it also beats
the start in fresh interleaved rounds.
"""

import dataclasses
import json
import math
import sys
from typing import Dict, List

from absl import flags
from absl import logging

from tfplace import interrupts
from tfplace.cli import input_flags, real_flags
from tfplace.cli.run_helpers import CLUSTER_HELP, LOOP_TRIP_COUNTS_HELP
from tfplace.errors import PlacementError, TfplaceError

_CLUSTER = flags.DEFINE_string("cluster", None, CLUSTER_HELP)
_PLACER = flags.DEFINE_string(
    "placer", "m_etf", "placer name (listed below with their options)")
_PLACER_OPTIONS = flags.DEFINE_string(
    "placer_options", "", "the placer's options, key=value,key=value "
    "(listed below)")
_OUT = flags.DEFINE_string("out", None, "where to write the placement JSON")
_BUDGET_S = flags.DEFINE_float(
    "budget_s", None, "search and learned placers: seconds the search may "
    "take once the start placement is found (the placer option budget_s; a "
    "learned placer's building, compiling and pre-training of its networks "
    "count, and it ends with the train step that spends it)")
_INIT = flags.DEFINE_string(
    "init", None, "search and learned placers: the start placement: "
    "best_heuristic, a placer name or a placement JSON (the placer option "
    "init)")
_SEED = flags.DEFINE_integer(
    "seed", None, "random seed for the placer (hash, min-cut, searches and "
    "learned placers; the others are deterministic)", lower_bound=0)
_COST_MODEL = flags.DEFINE_string(
    "cost_model", None, "op cost model: analytical, grappler or calibrated "
    "(default: analytical, or calibrated when --calibration is given)")
_CALIBRATION = flags.DEFINE_string(
    "calibration", None, "optional calibration JSON (tfplace.calibration/1)")
_ALLOW_INFEASIBLE = flags.DEFINE_bool(
    "allow_infeasible", False, "write the placement even if it does not fit "
    "in memory (exit 0)")
_JSON = flags.DEFINE_bool("json", False, "print the result as one JSON object")
flags.adopt_module_key_flags(input_flags)
_LOOP_TRIP_COUNTS = flags.DEFINE_string(
    "loop_trip_counts", None, LOOP_TRIP_COUNTS_HELP)
_AGENT = flags.DEFINE_enum(
    "agent", None, ["reinforce", "ppo"], "learned placers: the tf-agents "
    "agent (ReinforceAgent or PPOClipAgent)")
_MAX_SAMPLES = flags.DEFINE_integer(
    "max_samples", None, "learned placers: sample budget (placements drawn)")
_LOGDIR = flags.DEFINE_string(
    "logdir", None, "learned placers: checkpoints, TensorBoard curves and the "
    "best placement so far")
_RESUME = flags.DEFINE_bool(
    "resume", False, "learned placers: continue the search checkpointed in "
    "--logdir")
# Flags that set the placer option of the same name, with the placers that
# have it.
_OPTION_FLAGS = ((_BUDGET_S, "search and learned"),
                 (_INIT, "search and learned"), (_AGENT, "learned"),
                 (_MAX_SAMPLES, "learned"), (_LOGDIR, "learned"),
                 (_RESUME, "learned"))
flags.adopt_module_key_flags(real_flags)


def extra_help() -> str:
  """The placers and their options, appended to `tfplace place --help`."""
  from tfplace.placers.registry import describe_placers
  return "placers (--placer) and their options (--placer_options):\n" + (
      describe_placers())


def main(argv: List[str]) -> None:
  """Runs `tfplace place`; see the module docstring."""
  from tfplace import pipeline
  from tfplace.cli.run_helpers import (calibration_coverage,
                                      cluster_and_cost_model,
                                      parse_loop_trip_counts)
  from tfplace.graph.importers import import_graph
  from tfplace.io_utils import check_out_path
  from tfplace.placers.registry import get_placer
  if len(argv) != 2:
    raise TfplaceError("expected exactly one GRAPH argument: tfplace place "
                       "GRAPH --cluster C --placer P --out placement.json")
  check_out_path(_OUT.value, inputs=[argv[1], _INIT.value, _CLUSTER.value,
                                      _CALIBRATION.value])
  real_flags.check_flags()
  options = placer_options()
  placer = get_placer(_PLACER.value, options)  # Bad name/options first.
  if _SEED.value is not None and not placer.uses_seed:
    logging.warning("--seed has no effect on %s: its placement does not "
                    "depend on a seed", _PLACER.value)
  cluster, cost_model = cluster_and_cost_model(
      _CLUSTER.value, _COST_MODEL.value, _CALIBRATION.value)
  graph = import_graph(argv[1], loop_trip_counts=parse_loop_trip_counts(
      _LOOP_TRIP_COUNTS.value), **input_flags.import_kwargs())
  if real_flags.wanted():
    placement = real_flags.place(graph, cluster, cost_model, _PLACER.value,
                                 options, _SEED.value)
  else:
    placement = pipeline.place(graph, cluster, placer=_PLACER.value,
                               options=options, cost_model=cost_model,
                               seed=_SEED.value)
  if placement.metadata.feasible is False and not _ALLOW_INFEASIBLE.value:
    raise PlacementError(
        f"{_PLACER.value}'s placement does not fit in memory (out of memory on "
        f"{', '.join(placement.metadata.oom_devices) or 'a device'}); nothing "
        f"written to {_OUT.value}. Try another placer, a cluster with more "
        "memory, or --allow_infeasible to write it anyway")
  search = placement.metadata.extra.get("search") or {}
  if search.get("interrupted") or interrupts.interrupted():
    # Ctrl-C stopped a search (on the simulator or on real runs): save the
    # best so far, exit 130.
    with interrupts.writes_allowed():
      placement.save(_OUT.value)
  else:
    placement.save(_OUT.value)
  _report(placement, _OUT.value,
          calibration_coverage(graph, cluster, cost_model, placement))
  if real_flags.wanted():
    real_flags.exit_now_if_tf_busy()


def placer_options() -> Dict[str, str]:
  """--placer_options with the option flags (`_OPTION_FLAGS`) folded in.

  Raises:
    PlacementError: a flag given for a placer without that option.
  """
  from tfplace.placers.options import parse_option_text
  from tfplace.placers.registry import placer_class
  options = parse_option_text(_PLACER_OPTIONS.value)
  for flag, placers in _OPTION_FLAGS:
    if flag.value is None or flag.value is False:
      continue  # Not given (--noresume is the default anyway).
    fields = {f.name for f in dataclasses.fields(
        placer_class(_PLACER.value).Options)}
    if flag.name not in fields:
      raise PlacementError(f"--{flag.name} is for {placers} placers; "
                           f"{_PLACER.value} has no {flag.name} option")
    options[flag.name] = str(flag.value)
  return options


def _report(placement, out: str, coverage) -> None:
  """Prints the step time and op counts per device (and, calibrated, the
  share of predicted op time on op types the calibration has not seen; for
  a search placer, its start and figures)."""
  from tfplace.cli.run_helpers import coverage_fields
  meta = placement.metadata
  step = meta.predicted_step_time_s
  counts = placement.device_counts()
  search = meta.extra.get("search")
  if _JSON.value:
    out_json = {
        "out": out, "placer": meta.placer, "predicted_step_time_s": step,
        "feasible": meta.feasible, "oom_devices": list(meta.oom_devices),
        "ops_per_device": counts, **coverage_fields(coverage)}
    if search:
      out_json["search"] = {k: v for k, v in search.items() if k != "history"}
    for key in ("verify", "real_reward"):
      if key in meta.extra:
        out_json[key] = meta.extra[key]
    sys.stdout.write(json.dumps(out_json) + "\n")
    return
  if step is not None and math.isfinite(step):
    text = f"predicted step time {step * 1e3:.3f} ms"
  else:
    text = ("infeasible: out of memory on "
            f"{', '.join(meta.oom_devices) or 'a device'}")
  sys.stdout.write(f"{meta.placer}: {text}; wrote {out}\n")
  if coverage is not None:
    sys.stdout.write(coverage.describe() + "\n")
  if search:
    sys.stdout.write("  " + _search_line(search) + "\n")
  for device, n in sorted(counts.items()):
    sys.stdout.write(f"  {device}: {n} ops\n")
  sys.stdout.write("".join(f"{line}\n"
                           for line in real_flags.report_lines(placement)))


def _search_line(search: dict) -> str:
  """One line about a search: start, best, evaluations, interruption."""
  def ms(value):
    return "infeasible" if value is None else f"{value * 1e3:.3f} ms"
  line = (f"search: start {ms(search.get('start_step_time_s'))} "
          f"({search.get('start')}), best {ms(search.get('step_time_s'))} "
          f"after {search.get('evaluations')} evaluations in "
          f"{search.get('seconds')} s ({search.get('evaluations_per_s')}/s)")
  if search.get("returned_start"):
    line += " - no faster than the start, so the start was written"
  if search.get("gap") is not None:
    line += f"; CP-SAT gap {search['gap']:.1%} ({search.get('solver_status')})"
  stages = search.get("stages") or ()
  if stages:
    line += "; " + ", then ".join(
        f"{stage['stage']} ({stage['groups']}): {ms(stage['step_time_s'])} "
        f"after {stage['evaluations']} evaluations" for stage in stages)
  if search.get("resumed"):
    line += "; resumed (the figures count every run of the search)"
  if search.get("interrupted"):
    line += "; interrupted (best so far written)"
  return line
