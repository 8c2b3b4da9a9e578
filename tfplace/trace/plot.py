"""Gantt chart of a trace: one row per device, ops as bars over time.

Needs matplotlib (the `viz` extra: `pip install tfplace[viz]`); it is imported
only when a chart is drawn.
"""

import io
from typing import Dict, List, Optional, Tuple

from tfplace.errors import TfplaceError
from tfplace.io_utils import atomic_write
from tfplace.trace.trace import OP, Trace

_MAX_LEGEND = 12


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


def _rows(trace: Trace) -> List[Tuple[str, list]]:
  """(label, events) per row: devices first, then one per transfer pair."""
  rows = [(d, [e for e in trace.events_on(d) if e.kind == OP])
          for d in trace.devices()]
  pairs: Dict[str, list] = {}
  for e in trace.transfers():
    label = f"{_short(e.src_device or '?')} -> {_short(e.dst_device or '?')}"
    pairs.setdefault(label, []).append(e)
  return [(_short(d), evs) for d, evs in rows] + sorted(pairs.items())


def _short(device: str) -> str:
  """"/job:localhost/replica:0/task:0/device:CPU:0" -> "task:0/CPU:0"."""
  parts = [p for p in device.split("/") if p]
  task = next((p for p in parts if p.startswith("task:")), None)
  dev = parts[-1].replace("device:", "") if parts else device
  return f"{task}/{dev}" if task and dev != task else dev


def _palette(trace: Trace, cmap) -> Dict[str, tuple]:
  """A color per op type: distinct for the 19 with most time, gray after."""
  totals: Dict[str, float] = {}
  for e in trace.events:
    totals[e.op_type] = totals.get(e.op_type, 0.0) + e.duration_s
  ranked = sorted(totals, key=lambda t: (-totals[t], t))
  gray = cmap(15)  # tab20's gray pair is 14/15
  colors = [cmap(i) for i in range(20) if i not in (14, 15)]
  return {t: colors[i] if i < len(colors) else gray for i, t in enumerate(ranked)}


def gantt(trace: Trace, path: str, title: Optional[str] = None) -> None:
  """Draws `trace` as a Gantt chart and writes it to `path` (PNG, atomic).

  Args:
    trace: the trace.
    path: output `.png` path.
    title: chart title (default: the trace's source).

  Raises:
    TfplaceError: if matplotlib is missing or `path` is not a `.png`.
  """
  check_gantt_path(path)
  plt = _require_matplotlib()
  rows = _rows(trace)
  cmap = plt.get_cmap("tab20")
  fig, ax = plt.subplots(figsize=(12, 1.2 + 0.6 * len(rows)), dpi=100)
  try:
    palette = _palette(trace, cmap)
    for y, (_, events) in enumerate(rows):
      ax.broken_barh([(e.start_s * 1e3, max(e.duration_s * 1e3, 1e-6)) for e in events],
                     (y - 0.35, 0.7), facecolors=[palette[e.op_type] for e in events],
                     edgecolor="black", linewidth=0.3)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([label for label, _ in rows])
    ax.invert_yaxis()
    ax.set_xlim(0, max(trace.span_s() * 1e3, 1e-6))
    ax.set_xlabel("time (ms)")
    ax.set_title(title or trace.source or "trace")
    ax.grid(axis="x", linestyle=":", linewidth=0.5)
    top = list(palette)[:_MAX_LEGEND]
    handles = [plt.Rectangle((0, 0), 1, 1, color=palette[t]) for t in top]
    ax.legend(handles, top, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              fontsize="small", title="op type")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
  finally:
    plt.close(fig)
  atomic_write(path, buf.getvalue())
