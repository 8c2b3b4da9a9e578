"""Variables of a placed step: where they live, where the placement wants them,
and creating them there.

A resource variable lives on the device it was created on, and TF runs every
op that reads or updates it there, whatever the placement says. So:

  * variables created while a placed step is built or traced (by
    `tfplace.apply` for a Keras model, or a step factory) are created on the
    device the placement gives their colocation group: a first build records
    the order in which variables are created and which placeholder of the
    traced step each one becomes (`plan_variables`); the second build creates
    the k-th variable on the device planned for the k-th (`VariableReplay`),
    checking that names, shapes and dtypes agree;
  * variables created before `tfplace.apply` stay where they are; applying a
    placement that puts one elsewhere is an error that names it
    (`check_variables`).

Optimizer slots are created next to their variable by the optimizers
(`colocate_vars_with`); the plan gives them the same device, as the
placement puts a slot and its variable in one colocation group.
"""

import collections
import contextlib
import dataclasses
from typing import Iterator, List, Optional, Sequence, Tuple

from absl import logging

from tfplace.device_names import canonical_device
from tfplace.errors import PlacementError
from tfplace.placement import Placement


@dataclasses.dataclass(frozen=True)
class CapturedVariable:
  """A variable a traced step uses.

  Attributes:
    name: the variable's name ("dense/kernel:0").
    placeholder: its placeholder in the trace ("X/resource"), which is the
      VarHandleOp of the imported graph.
    device: the device it lives on.
    placed_on: the device the placement gives it (None: not named).
    users: ops of the trace that take its handle.
  """
  name: str
  placeholder: str
  device: str
  placed_on: Optional[str]
  users: Tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class PlannedVariable:
  """One variable of a build, in creation order, and its device."""
  name: str
  shape: Tuple[Optional[int], ...]
  dtype: str
  device: Optional[str]


def captured_variables(step_graph,
                       placement: Placement) -> List[CapturedVariable]:
  """The variables `step_graph` captures, with their devices."""
  out = []
  for var in step_graph.variables:
    internal = placeholder_of(step_graph, var.handle)
    if internal is None:
      continue
    users = tuple(op.name for op in internal.consumers())
    out.append(CapturedVariable(
        name=var.name, placeholder=internal.op.name,
        device=canonical_device(var.device),
        placed_on=_placed_on(internal.op.name, users, placement),
        users=users))
  return out


def placeholder_of(graph, handle):
  """The tensor standing for eager tensor `handle` in FuncGraph `graph`, or
  None if not captured. A nested graph captures either the eager tensor
  itself or its placeholder in the graph it is nested in."""
  found = _internal(graph, handle)
  if found is not None:
    return found
  outer = getattr(graph, "outer_graph", None)
  if outer is None or not hasattr(outer, "captures"):
    return None
  external = placeholder_of(outer, handle)
  return None if external is None else _internal(graph, external)


def _internal(graph, external):
  for ext, internal in graph.captures:
    if ext is external:
      return internal
  return None


def _placed_on(placeholder: str, users: Sequence[str],
               placement: Placement) -> Optional[str]:
  """The placement's device for a variable: its VarHandleOp's, else the one
  most of its named users get."""
  devices = placement.devices
  if placeholder in devices:
    return devices[placeholder]
  counts = collections.Counter(devices[u] for u in users if u in devices)
  return counts.most_common(1)[0][0] if counts else None


def check_split(variables: Sequence[CapturedVariable],
                placement: Placement) -> None:
  """Raises PlacementError if the placement splits a variable from an op that
  reads or updates it."""
  for var in variables:
    if var.placed_on is None:
      continue
    split = [u for u in var.users
             if placement.devices.get(u, var.placed_on) != var.placed_on]
    if split:
      raise PlacementError(
          f"the placement splits variable {var.name!r} (on {var.placed_on} "
          f"with {var.placeholder!r}) from {split[0]!r} on "
          f"{placement.devices[split[0]]}; an op that reads or updates a "
          "variable runs on the variable's device: place each colocation "
          "group whole (Placement.validate(graph) checks this)")


def check_devices(variables: Sequence[CapturedVariable]) -> None:
  """Raises PlacementError if a variable lives elsewhere than the placement
  puts it."""
  wrong = [v for v in variables
           if v.placed_on is not None and v.device != v.placed_on]
  if wrong:
    v = wrong[0]
    raise PlacementError(
        f"variable {v.name!r} lives on {v.device} but the placement puts it "
        f"on {v.placed_on} ({len(wrong)} variable(s) so); a variable stays "
        "on the device it was created on. Let tfplace create the variables: "
        "tfplace.apply(model, placement, args=...) for a Keras model, "
        "tfplace.apply(make_step, placement, factory=True, args=...) for a "
        "step built by make_step()")


# ---- creating variables where planned ---------------------------------------


@contextlib.contextmanager
def record_creations() -> Iterator[list]:
  """Yields the list of variables created inside the block, in order."""
  import tensorflow as tf
  created: list = []

  def creator(next_creator, **kwargs):
    var = next_creator(**kwargs)
    created.append(var)
    return var

  with tf.variable_creator_scope(creator):
    yield created


def plan_variables(created: Sequence[object], step_graph,
                   placement: Placement) -> Tuple[PlannedVariable, ...]:
  """The device of each created variable that the traced step captures (the
  placement's device for it), None for the others."""
  placed = {v.placeholder: v.placed_on
            for v in captured_variables(step_graph, placement)}
  out = []
  for var in created:
    internal = placeholder_of(step_graph, var.handle)
    device = placed.get(internal.op.name) if internal is not None else None
    out.append(PlannedVariable(name=var.name, shape=_shape(var),
                               dtype=var.dtype.name, device=device))
  return tuple(out)


def _shape(var) -> Tuple[Optional[int], ...]:
  return tuple(var.shape.as_list()) if var.shape.rank is not None else ()


class VariableReplay:
  """A variable creator that creates the k-th variable on the k-th planned
  device; variables beyond the plan go where TF puts them.

  Attributes:
    plan: the planned variables.
    created: how many variables were created so far.
    unplanned: names of variables created beyond the plan.
  """

  def __init__(self, plan: Sequence[PlannedVariable]):
    self.plan = tuple(plan)
    self.created = 0
    self.unplanned: List[str] = []

  @contextlib.contextmanager
  def scope(self):
    """Enters the creator (eagerly: TF hands it to the traces inside)."""
    import tensorflow as tf
    with tf.variable_creator_scope(self._creator):
      yield self

  def _creator(self, next_creator, **kwargs):
    import tensorflow as tf
    k = self.created
    self.created += 1
    if k >= len(self.plan):
      var = next_creator(**kwargs)
      self.unplanned.append(var.name)
      logging.info("variable %s is not in the plan; TF places it on %s",
                   var.name, var.device)
      return var
    planned = self.plan[k]
    with (tf.device(planned.device) if planned.device
          else contextlib.nullcontext()):
      var = next_creator(**kwargs)
    if (var.name, _shape(var), var.dtype.name) != (
        planned.name, planned.shape, planned.dtype):
      raise PlacementError(
          f"the second build creates variable #{k} as {var.name!r} "
          f"{list(_shape(var))} {var.dtype.name}, the first created "
          f"{planned.name!r} {list(planned.shape)} {planned.dtype}; the "
          "build must create the same variables in the same order each time "
          "(name Keras layers: automatic names change from build to build)")
    return var

  @property
  def pending(self) -> int:
    """Planned variables not created yet."""
    return max(0, len(self.plan) - self.created)
