"""Fidelity results as Markdown: one table per graph, the cross matrix with
the targets it is judged by."""

import math

import numpy as np

from tfplace.cost.calibrated import Calibration
from tfplace.experiments.fidelity import (TARGET_BEST_REGRET,
                                          TARGET_MEDIAN_ERROR,
                                          TARGET_SPEARMAN,
                                          TARGET_UNCALIBRATED_RATIO,
                                          CrossReport, FidelityReport)
from tfplace.measurement.machine_drift import (benchmark_spread,
                                               describe_spread)
from tfplace.measurement.timing import describe_inputs
from tfplace.units import format_seconds


def markdown_table(report: FidelityReport) -> str:
  """The per-placement table, predicted vs measured, in milliseconds."""
  lines = [f"### {report.graph_name} ({report.num_ops} ops)", "",
           "| placement | transfers | predicted ms | uncalibrated ms | "
           "measured ms | abs error |", "|---|---:|---:|---:|---:|---:|"]
  for r in report.rows:
    measured = (f"{r.measured_s * 1e3:.2f}" if r.measured_s
                else f"failed: {r.error}")
    err = (f"{r.abs_rel_error * 100:.1f} %" if r.abs_rel_error is not None
           else "-")
    plain = (f"{r.uncalibrated_s * 1e3:.2f}" if r.uncalibrated_s is not None
             else "-")
    lines.append(f"| {r.label} | {r.num_transfers} | "
                 f"{r.predicted_s * 1e3:.2f} | {plain} | {measured} | {err} |")
  lines += ["", f"inputs: {describe_inputs(report.inputs)}", "",
            f"median abs error {_pct(report.median_abs_rel_error)}, "
            f"Spearman {report.spearman:.3f}; {describe(report.calibration)}"]
  if report.calibration_report is not None:
    fit = report.calibration_report
    lines += ["", f"in-sample median abs error on the {len(fit.runs)} "
              f"calibration runs: {_pct(fit.median_abs_rel_error)}"]
  lines.append("")
  return "\n".join(lines)


def describe(calibration: Calibration) -> str:
  """The calibration's cluster figures in one line."""
  link = next(iter(calibration.links.values()), None)
  link_text = (f"link latency {format_seconds(link.latency_s)}, "
               f"{link.bandwidth / 1e9:.2f} GB/s" if link else "no link")
  excess = {k: v for k, v in calibration.trace_excess_s.items() if v > 0}
  return (f"calibration: launch {_per_type(calibration.launch_overhead_s)}, "
          + (f"trace excess {_per_type(excess)} per op, " if excess else "")
          + "".join(_launch_bound(calibration, t)
                    for t in sorted(calibration.launch_s))
          + f"per transfer {_per_type(calibration.transfer_overhead_s)}"
          f"{_per_megabyte(calibration.transfer_byte_s)}, "
          f"step {format_seconds(calibration.step_overhead_s)}, {link_text}"
          f"{' (rendezvous)' if calibration.rendezvous_transfers else ''}, "
          f"{sum(len(v) for v in calibration.op_types.values())} op types "
          "fitted")


def _launch_bound(calibration: Calibration, device_type: str) -> str:
  """A launch-bound device type's figures, e.g. "GPU launch-bound (conv
  19.5 us, ..., dispatch 2.1 us per op, stall 358 us per step), "."""
  launch = ", ".join(f"{k} {format_seconds(v)}" for k, v in
                     calibration.launch_s[device_type].items())
  return (f"{device_type} launch-bound ({launch}, dispatch "
          f"{format_seconds(calibration.dispatch_s.get(device_type, 0.0))} "
          f"per op, stall "
          f"{format_seconds(calibration.stall_s.get(device_type, 0.0))} per "
          "step), ")


def _per_type(values) -> str:
  return ", ".join(f"{k} {format_seconds(v)}"
                   for k, v in sorted(values.items())) or "-"


def _per_megabyte(values) -> str:
  """The host cost per MB transferred, as a suffix (empty without one)."""
  costs = {k: v for k, v in values.items() if v > 0}
  if not costs:
    return ""
  return " + " + ", ".join(f"{k} {format_seconds(v * 1e6)}"
                           for k, v in sorted(costs.items())) + " per MB"


def _pct(value: float) -> str:
  return "-" if math.isnan(value) else f"{value * 100:.1f} %"


def _ratio(value: float) -> str:
  return "-" if math.isnan(value) else f"{value:.2f}"


def _mark(ok: bool) -> str:
  return "yes" if ok else "NO"


def cross_matrix(cross: CrossReport) -> str:
  """The matrix of `scripts/fidelity.py --cross`: one row per judged graph,
  each target checked, then whether all are met."""
  lines = ["| graph | placements | median abs error | Spearman | "
           "predicted best (measured best) | regret | uncalibrated error | "
           "uncalibrated pred/meas | uncalibrated Spearman | unseen op "
           "time | machine drift | error at the drift | rounds' spread | "
           "level (pred/meas) | error beside the level | targets met |",
           "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---|---:|---:|"
           "---:|---:|---|"]
  all_ok = True
  for r in cross.reports:
    ok = targets_met(r)
    all_ok = all_ok and all(ok.values())
    failed = [k for k, v in ok.items() if not v]
    lines.append(
        f"| {r.graph_name} | {sum(1 for x in r.rows if x.measured_s)} | "
        f"{_pct(r.median_abs_rel_error)} | {r.spearman:.3f} | "
        f"{r.predicted_best} ({r.measured_best}) | {_pct(r.best_regret)} | "
        f"{_pct(r.uncalibrated_median_abs_rel_error)} | "
        f"{r.uncalibrated_median_ratio:.2f} | "
        f"{r.uncalibrated_spearman:.3f} | {_pct(r.uncalibrated_share)} | "
        f"{r.drift.describe() if r.drift else 'not probed'} | "
        f"{_pct(r.drift_adjusted_error)} | {_pct(r.round_spread)} | "
        f"{_ratio(r.level)} | {_pct(r.level_free_error)} | "
        f"{'all' if not failed else 'not ' + ', '.join(failed)} |")
  fit = cross.calibration_report
  lines += ["", f"calibrated once on {', '.join(fit.graph_names)} "
            f"({fit.num_samples} op records; in-sample median abs error "
            f"{_pct(fit.median_abs_rel_error)} on {len(fit.runs)} runs); "
            f"{describe(fit.calibration)}"]
  if fit.second_pass:
    lines.append(fit.second_pass)
  steadiness = describe_spread(benchmark_spread(fit.benchmark_repeats),
                               len(fit.benchmark_repeats))
  lines += [steadiness, ""] if steadiness else [""]
  lines.append("targets per graph: median abs error <= "
               f"{TARGET_MEDIAN_ERROR * 100:.0f} %, Spearman >= "
               f"{TARGET_SPEARMAN}, predicted best within "
               f"{TARGET_BEST_REGRET * 100:.0f} % of the measured best, "
               f"uncalibrated within {TARGET_UNCALIBRATED_RATIO:.0f}x: "
               f"{'all met' if all_ok else 'NOT all met'}")
  if any(r.drift for r in cross.reports):
    lines += ["", "machine drift: time ratios of a cluster benchmark right "
              "after the graph's runs to the calibration's (> 1: the "
              "machine was slower than when calibrated); error at the "
              "drift: the median abs error with the calibration's figures "
              "scaled by those ratios (the model's error, less the "
              "machine's measured change; not a target)"]
  lines += ["", "level: the median predicted / measured over the graph's "
            "placements; error beside the level: the median abs error of "
            "the predictions divided by it, how well the placements are "
            "predicted relative to each other (what a placement search "
            "uses; on a shared machine the level also carries the "
            "machine's speed while the graph ran; not a target)"]
  if any(not math.isnan(r.round_spread) for r in cross.reports):
    lines += ["", "rounds' spread: each placement measured in every round "
              "(--rounds), the median over placements of slowest / fastest "
              "round - 1: how far the measurement itself repeats, the error "
              "of a model that predicted one round exactly (not a target)"]
  return "\n".join(lines) + "\n"


def targets_met(report: FidelityReport) -> dict:
  """Target name -> met, for one judged graph."""
  ratio = report.uncalibrated_median_ratio
  return {
      "error": report.median_abs_rel_error <= TARGET_MEDIAN_ERROR,
      "spearman": report.spearman >= TARGET_SPEARMAN,
      "best": report.best_regret <= TARGET_BEST_REGRET,
      "uncalibrated": (not math.isnan(ratio) and
                       1 / TARGET_UNCALIBRATED_RATIO <= ratio
                       <= TARGET_UNCALIBRATED_RATIO),
  }


def cross_json(cross: CrossReport) -> dict:
  """The matrix as a JSON-able dict."""
  def num(x):
    return None if isinstance(x, float) and math.isnan(x) else x
  spread = benchmark_spread(cross.calibration_report.benchmark_repeats)
  return {"graphs": {r.graph_name: {
      "median_abs_rel_error": num(r.median_abs_rel_error),
      "spearman": num(r.spearman), "best_regret": num(r.best_regret),
      "predicted_best": r.predicted_best, "measured_best": r.measured_best,
      "uncalibrated_median_abs_rel_error":
          num(r.uncalibrated_median_abs_rel_error),
      "uncalibrated_median_ratio": num(r.uncalibrated_median_ratio),
      "uncalibrated_spearman": num(r.uncalibrated_spearman),
      "uncalibrated_share": num(r.uncalibrated_share),
      "placements": sum(1 for x in r.rows if x.measured_s),
      "drift": r.drift.to_dict() if r.drift else None,
      "drift_adjusted_median_abs_rel_error": num(r.drift_adjusted_error),
      "round_spread": num(r.round_spread),
      "level": num(r.level),
      "level_free_median_abs_rel_error": num(r.level_free_error),
      "targets_met": targets_met(r)} for r in cross.reports},
      "calibration": {
          "graphs": list(cross.calibration_report.graph_names),
          "in_sample_median_abs_rel_error":
              num(cross.calibration_report.median_abs_rel_error),
          "second_pass": cross.calibration_report.second_pass,
          "benchmark_spread": spread.to_dict() if spread else None}}


def records_summary(named) -> str:
  """Markdown: the targets met by one calibration model on several
  replayed cross records (`tfplace.experiments.cross_record`), per record
  and over all (and the error target with each graph's predictions at its
  drift probe, where probed; the error target beside each graph's level,
  `FidelityReport.level_free_error`; the median over graphs of the rounds'
  spread, where measured in rounds), the pooled error of every measured
  placement, and per graph the median over records of its median error.

  Args:
    named: (record name, `CrossReport`) per record.
  """
  names = ("error", "spearman", "best", "uncalibrated")
  lines = ["| record | " + " | ".join(names) + " | median error | error "
           "target at the drift | error target beside the level | rounds' "
           "spread |",
           "|---|" + "---:|" * (len(names) + 4)]
  totals = dict.fromkeys(names, 0)
  graphs, log_errors, per_graph = 0, [], {}
  drift_met, probed, level_free_met = 0, 0, 0
  for name, cross in named:
    met = [targets_met(r) for r in cross.reports]
    for n in names:
      totals[n] += sum(m[n] for m in met)
    graphs += len(cross.reports)
    medians = [r.median_abs_rel_error for r in cross.reports]
    adjusted = [r.drift_adjusted_error for r in cross.reports
                if not math.isnan(r.drift_adjusted_error)]
    ok = sum(e <= TARGET_MEDIAN_ERROR for e in adjusted)
    drift_met, probed = drift_met + ok, probed + len(adjusted)
    level_free = sum(r.level_free_error <= TARGET_MEDIAN_ERROR
                     for r in cross.reports)
    level_free_met += level_free
    spreads = [r.round_spread for r in cross.reports
               if not math.isnan(r.round_spread)]
    spread = float(np.median(spreads)) if spreads else math.nan
    lines.append(f"| {name} | " + " | ".join(
        f"{sum(m[n] for m in met)}/{len(met)}" for n in names)
                 + f" | {_pct(float(np.nanmedian(medians)))} | "
                 + (f"{ok}/{len(adjusted)}" if adjusted else "not probed")
                 + f" | {level_free}/{len(cross.reports)} | {_pct(spread)} |")
    for r in cross.reports:
      per_graph.setdefault(r.graph_name, []).append(r.median_abs_rel_error)
      log_errors += [math.log(x.predicted_s / x.measured_s) for x in r.rows
                     if x.measured_s and math.isfinite(x.predicted_s)]
  lines.append("| all | " + " | ".join(f"{totals[n]}/{graphs}"
                                        for n in names)
               + f" | | {drift_met}/{probed} | {level_free_met}/{graphs} | |")
  errors = np.array(log_errors)
  lines.append("")
  lines.append(f"pooled over {errors.size} measured placements: median "
               f"|log(predicted / measured)| {np.median(np.abs(errors)):.3f}, "
               f"mean log {errors.mean():+.3f}" if errors.size else
               "no measured placements")
  lines.append("per graph, the median over records of its median error: "
               + ", ".join(f"{g} {_pct(float(np.nanmedian(v)))}"
                           for g, v in per_graph.items()))
  return "\n".join(lines) + "\n"


def placements_summary(named) -> str:
  """Markdown: per graph and placement label, predicted / measured over
  several replayed cross records: its cross-device tensors (the label's
  placement may differ from record to record), how many records measured
  it, the median ratio and its range, and the median measured step. Where
  a model leans (splits low, one-worker steps high) shows here, not in the
  targets.

  Args:
    named: (record name, `CrossReport`) per record.
  """
  ratios, steps, transfers = {}, {}, {}
  for _, cross in named:
    for r in cross.reports:
      for row in r.rows:
        if not row.measured_s or not math.isfinite(row.predicted_s):
          continue
        key = (r.graph_name, row.label)
        ratios.setdefault(key, []).append(row.predicted_s / row.measured_s)
        steps.setdefault(key, []).append(row.measured_s)
        transfers.setdefault(key, []).append(row.num_transfers)
  lines = ["| graph | placement | transfers, median | records | predicted "
           "/ measured, median | range | measured step, median |",
           "|---|---|---:|---:|---:|---|---:|"]
  for key, values in ratios.items():
    graph, label = key
    lines.append(
        f"| {graph} | {label} | {np.median(transfers[key]):.0f} "
        f"| {len(values)} | {np.median(values):.2f} "
        f"| {min(values):.2f}-{max(values):.2f} "
        f"| {np.median(steps[key]) * 1e3:.2f} ms |")
  return "\n".join(lines) + "\n"
