"""Gantt chart of a trace: one row per device, ops as bars over time.

Rows are labelled with the shortest device names that stay distinct
(`short_device_names`). Transfers get one lane per (source, destination)
pair, labelled with their count and bytes; each transfer is a thin line from
its start to its end with a tick at its start, so they can be counted where a
bar per transfer would merge into one block; with few transfers, a faint
arrow also joins the source and destination rows. The title gives the step
time and, when a placement is given, its placer and devices.

Needs matplotlib (the `viz` extra: `pip install tfplace[viz]`); it is imported
only when a chart is drawn.
"""

import dataclasses
import io
from typing import Dict, List, Optional, Tuple

from tfplace.units import format_bytes
from tfplace.errors import TfplaceError
from tfplace.io_utils import atomic_write
from tfplace.trace.summary import max_op_runs
from tfplace.trace.trace import OP, Trace, TraceEvent, short_device_names

_MAX_LEGEND = 12
# Above this many transfers, no arrows between device rows (too dense).
_MAX_ARROWS = 60


@dataclasses.dataclass(frozen=True)
class GanttLayout:
  """What the chart shows, before drawing.

  Attributes:
    title: the chart title.
    device_rows: (label, op events) per device, in device order.
    transfer_lanes: (label, transfer events, src row, dst row) per device
      pair; a row is None when that device has no ops.
  """
  title: str
  device_rows: Tuple[Tuple[str, Tuple[TraceEvent, ...]], ...]
  transfer_lanes: Tuple[Tuple[str, Tuple[TraceEvent, ...], Optional[int],
                              Optional[int]], ...]


def _require_matplotlib():
  """Imports matplotlib with the Agg backend, or raises TfplaceError."""
  try:
    import matplotlib  # pylint: disable=import-outside-toplevel
  except ImportError:
    raise TfplaceError("drawing a Gantt chart needs matplotlib: "
                       "pip install 'tfplace[viz]'") from None
  matplotlib.use("Agg", force=True)
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  return plt


def check_gantt_path(path: str) -> None:
  """Raises TfplaceError unless `path` ends in `.png` and matplotlib is there."""
  if not path.lower().endswith(".png"):
    raise TfplaceError(f"{path}: a Gantt chart is written as .png")
  _require_matplotlib()


def check_placement_matches(trace: Trace, placement) -> None:
  """Raises TfplaceError unless `placement` is the one that ran in `trace`:
  its ops are in the trace and most ran where it puts them (a chart titled
  with another placement's placer and predicted time misleads). Trace
  devices that are not TF device strings (a profiler's host threads) are
  not compared."""
  from tfplace.device_names import canonical_device
  from tfplace.errors import ClusterError
  placed, traced = placement.devices, trace.ops()
  ops = [e for e in traced if e.name in placed]
  if traced and not ops:
    raise TfplaceError("the --placement shares no op with the trace: give "
                       "the placement that ran")
  moved = []
  for e in ops:
    try:
      ran, put = canonical_device(e.device), canonical_device(placed[e.name])
    except ClusterError:
      continue
    if ran != put:
      moved.append((e.name, ran, put))
  if len(moved) * 2 > len(ops):
    name, ran, put = moved[0]
    raise TfplaceError(
        f"the --placement is not the one that ran: {len(moved)} of "
        f"{len(ops)} traced ops ran elsewhere (e.g. {name} on {ran}, placed "
        f"on {put}); give the placement that ran")


def gantt_title(trace: Trace, placement=None) -> str:
  """"<placer> placement on N devices: step time X ms" (see `gantt`); a
  trace whose ops ran several times (several steps) gives its span, not a
  step time."""
  runs = max_op_runs(trace)
  step = (f"step time {trace.span_s() * 1e3:.3f} ms" if runs <= 1 else
          f"span {trace.span_s() * 1e3:.3f} ms (ops ran up to {runs} times: "
          "several steps)")
  devices = trace.devices()
  if placement is None:
    names = short_device_names(devices)
    return (f"{step} on {_count(len(devices), 'device')} "
            f"({', '.join(names.values())})")
  meta = placement.metadata
  used = sorted(set(placement.devices.values()))
  text = (f"{meta.placer or 'given'} placement on "
          f"{_count(len(used), 'device')}: {step}")
  if meta.predicted_step_time_s:
    text += f" (predicted {meta.predicted_step_time_s * 1e3:.3f} ms)"
  return text


def _count(n: int, noun: str) -> str:
  return f"{n} {noun}{'' if n == 1 else 's'}"


def gantt_layout(trace: Trace, placement=None,
                 title: Optional[str] = None) -> GanttLayout:
  """The chart's rows, lanes and title (see the module docstring)."""
  devices = list(trace.devices())
  ends = [d for e in trace.transfers() for d in (e.src_device, e.dst_device)
          if d]
  names = short_device_names(devices + ends)
  rows = tuple((names[d], tuple(e for e in trace.events_on(d) if e.kind == OP))
               for d in devices)
  row_of = {d: i for i, d in enumerate(devices)}
  pairs: Dict[Tuple[str, str], List[TraceEvent]] = {}
  for e in trace.transfers():
    pairs.setdefault((e.src_device or "?", e.dst_device or "?"), []).append(e)
  lanes = []
  for (src, dst), events in sorted(pairs.items()):
    nbytes = sum(e.nbytes for e in events)
    label = (f"{names.get(src, src)} -> {names.get(dst, dst)}: "
             f"{len(events)} transfer{'s' if len(events) != 1 else ''}"
             + (f", {format_bytes(nbytes)}" if nbytes else ""))
    lanes.append((label, tuple(events), row_of.get(src), row_of.get(dst)))
  return GanttLayout(title or gantt_title(trace, placement), rows,
                     tuple(lanes))


def _palette(trace: Trace, cmap) -> Dict[str, tuple]:
  """A color per op type: distinct for the 19 with most time, gray after."""
  totals: Dict[str, float] = {}
  for e in trace.events:
    totals[e.op_type] = totals.get(e.op_type, 0.0) + e.duration_s
  ranked = sorted(totals, key=lambda t: (-totals[t], t))
  gray = cmap(15)  # tab20's gray pair is 14/15
  colors = [cmap(i) for i in range(20) if i not in (14, 15)]
  return {t: colors[i] if i < len(colors) else gray for i, t in enumerate(ranked)}


def _draw_transfers(ax, layout: GanttLayout) -> None:
  """Thin lines with start ticks, one lane per pair; arrows when few."""
  first = len(layout.device_rows)
  total = sum(len(lane[1]) for lane in layout.transfer_lanes)
  for k, (_, events, src_row, dst_row) in enumerate(layout.transfer_lanes):
    y = first + k
    starts = [e.start_s * 1e3 for e in events]
    ax.hlines([y] * len(events), starts, [e.end_s * 1e3 for e in events],
              colors="tab:red", linewidth=1.5)
    ax.plot(starts, [y] * len(events), linestyle="none", marker="|",
            markersize=9, color="black")
    if total <= _MAX_ARROWS and src_row is not None and dst_row is not None:
      for e in events:
        ax.annotate("", xy=(e.end_s * 1e3, dst_row), xytext=(e.start_s * 1e3,
                                                             src_row),
                    arrowprops=dict(arrowstyle="->", color="tab:red",
                                    alpha=0.35, linewidth=0.6))


def figure_height(n_rows: int, n_legend: int) -> float:
  """Inches: 0.6 per row, and tall enough for the op-type legend beside
  the rows (one device and a dozen op types clipped the legend)."""
  return max(1.2 + 0.6 * n_rows, 1.0 + 0.25 * n_legend)


def gantt(trace: Trace, path: str, title: Optional[str] = None,
          placement=None) -> None:
  """Draws `trace` as a Gantt chart and writes it to `path` (PNG, atomic).

  Args:
    trace: the trace.
    path: output `.png` path.
    title: chart title (default: the step time and the devices, or the
      placement's placer and device count: `gantt_title`).
    placement: the `Placement` that ran, for the title.

  Raises:
    TfplaceError: if matplotlib is missing or `path` is not a `.png`.
  """
  check_gantt_path(path)
  plt = _require_matplotlib()
  layout = gantt_layout(trace, placement, title)
  labels = [r[0] for r in layout.device_rows] + [
      lane[0] for lane in layout.transfer_lanes]
  cmap = plt.get_cmap("tab20")
  palette = _palette(trace, cmap)
  op_types = {e.op_type for e in trace.ops()}
  top = [t for t in palette if t in op_types][:_MAX_LEGEND]
  fig, ax = plt.subplots(figsize=(12, figure_height(len(labels), len(top))),
                         dpi=100)
  try:
    for y, (_, events) in enumerate(layout.device_rows):
      ax.broken_barh([(e.start_s * 1e3, max(e.duration_s * 1e3, 1e-6))
                      for e in events], (y - 0.35, 0.7),
                     facecolors=[palette[e.op_type] for e in events],
                     edgecolor="black", linewidth=0.3)
    _draw_transfers(ax, layout)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels)
    ax.invert_yaxis()
    ax.set_xlim(0, max(trace.span_s() * 1e3, 1e-6))
    ax.set_xlabel("time (ms)")
    ax.set_title(layout.title)
    ax.grid(axis="x", linestyle=":", linewidth=0.5)
    handles = [plt.Rectangle((0, 0), 1, 1, color=palette[t]) for t in top]
    ax.legend(handles, top, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              fontsize="small", title="op type")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
  finally:
    plt.close(fig)
  atomic_write(path, buf.getvalue())
