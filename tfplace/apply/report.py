"""What applying a placement to one trace of a step did, and the checks on it.

`ApplyReport` counts the ops of the new trace that the placement names, lists
those it does not name (TF's own placer places them), the placement's ops the
trace lacks, the ops inside nested function calls (placed with their call
op), and the variables the step uses. `check_report` turns a placement made
for another step, or one that splits a variable from its users or puts it
where it does not live, into one `PlacementError`.
"""

import dataclasses
from typing import List, Sequence, Tuple

from tfplace.apply.device_function import CALL_OPS
from tfplace.apply.options import ApplyOptions
from tfplace.apply.variables import (CapturedVariable, check_devices,
                                     check_split)
from tfplace.errors import PlacementError
from tfplace.placement import Placement

# Ops that only the imported graph has: they initialize its variables.
_IMPORT_ONLY_SUFFIXES = ("/initial_value", "/Assign")
_LISTED = 10


@dataclasses.dataclass(frozen=True)
class ApplyReport:
  """One trace of a placed step.

  Attributes:
    num_trace_ops: ops in the step's graph.
    named_ops: how many of them the placement names.
    unnamed_ops: the others, placed by TF's placer.
    missing_ops: ops of the placement the trace lacks (import-only ops,
      which initialize the imported graph, left out).
    nested_ops: ops of the placement inside nested function calls of the
      step; they run on their call op's device.
    nested_conflicts: those of them the placement puts elsewhere than their
      call op.
    variables: the variables the step uses.
    call_prefix: the call op through which the placed function runs the
      step: TF's runtime names the step's ops "<call_prefix>/<op name>".
  """
  num_trace_ops: int
  named_ops: int
  unnamed_ops: Tuple[str, ...]
  missing_ops: Tuple[str, ...]
  nested_ops: int
  nested_conflicts: Tuple[str, ...]
  variables: Tuple[CapturedVariable, ...]
  call_prefix: str = ""

  @property
  def named_fraction(self) -> float:
    return self.named_ops / max(1, self.num_trace_ops)

  def summary(self) -> str:
    """One line for logs."""
    return (f"{self.named_ops}/{self.num_trace_ops} ops of the trace placed "
            f"by the placement ({100 * self.named_fraction:.1f} %), "
            f"{len(self.unnamed_ops)} left to TF's placer"
            f"{_some(self.unnamed_ops)}, {self.nested_ops} in nested "
            f"functions ({len(self.nested_conflicts)} elsewhere than their "
            f"call), {len(self.missing_ops)} placement op(s) not traced, "
            f"{len(self.variables)} variable(s)")


def _some(names: Sequence[str]) -> str:
  if not names:
    return ""
  more = f", ... {len(names) - _LISTED} more" if len(names) > _LISTED else ""
  return " (" + ", ".join(names[:_LISTED]) + more + ")"


def build_report(step_graph, placement: Placement,
                 variables: Sequence[CapturedVariable],
                 call_prefix: str = "") -> ApplyReport:
  """The report of one trace: `step_graph` is the traced step's FuncGraph."""
  devices = placement.devices
  ops = step_graph.get_operations()
  names = {op.name for op in ops}
  named = [op.name for op in ops if op.name in devices]
  unnamed = tuple(op.name for op in ops if op.name not in devices)
  nested, conflicts = _nested(ops, devices)
  nested_set = set(nested)
  missing = tuple(n for n in devices if n not in names and
                  n not in nested_set and not _import_only(n, names))
  return ApplyReport(
      num_trace_ops=len(ops), named_ops=len(named), unnamed_ops=unnamed,
      missing_ops=missing, nested_ops=len(nested),
      nested_conflicts=tuple(conflicts), variables=tuple(variables),
      call_prefix=call_prefix)


def _nested(ops, devices) -> Tuple[List[str], List[str]]:
  """Placement ops inside the step's function calls, and those placed
  elsewhere than the call."""
  calls = {op.name: devices.get(op.name) for op in ops if op.type in CALL_OPS}
  nested, conflicts = [], []
  if not calls:
    return nested, conflicts
  for name, device in devices.items():
    head = name.split("/", 1)[0]
    if head in calls and name != head:
      nested.append(name)
      if calls[head] is not None and device != calls[head]:
        conflicts.append(name)
  return nested, conflicts


def _import_only(name: str, trace_names) -> bool:
  if name == "init" or name.startswith("init_"):
    return True
  for suffix in _IMPORT_ONLY_SUFFIXES:
    if name.endswith(suffix) and name[:-len(suffix)] in trace_names:
      return True
  return False


def check_report(report: ApplyReport, placement: Placement,
                 options: ApplyOptions, variable_devices: bool = True) -> None:
  """Raises PlacementError for a placement that does not fit the trace.

  Args:
    report: the trace's report.
    placement: the placement.
    options: apply options.
    variable_devices: also check that each variable lives where the
      placement puts it (not for a first build, whose variables are
      created again).
  """
  if report.named_fraction < options.min_named_fraction:
    example = next(iter(placement.devices), "(none)")
    trace_example = report.unnamed_ops[0] if report.unnamed_ops else "(none)"
    raise PlacementError(
        f"the placement names {report.named_ops} of the "
        f"{report.num_trace_ops} ops of the traced step "
        f"({100 * report.named_fraction:.0f} %, fewer than "
        f"{100 * options.min_named_fraction:.0f} %): it was made for another "
        f"step or model (the trace has e.g. {trace_example!r}, the placement "
        f"{example!r}). Import the step you train with the same input "
        "signature (for Keras fit: tfplace.apply.keras.import_fit_step) and "
        "place that")
  if options.strict and report.unnamed_ops:
    raise PlacementError(
        f"strict: {len(report.unnamed_ops)} op(s) of the traced step are not "
        f"named by the placement{_some(report.unnamed_ops)}")
  check_split(report.variables, placement)
  if variable_devices:
    check_devices(report.variables)
