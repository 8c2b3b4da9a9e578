"""Costs of functional control flow (While, If, Case) from their bodies.

A While/If/Case op is placed whole, as one op, but it runs the ops of its
function bodies. Its `ControlFlowCost` lists them (flattened over nested
control flow and function calls), each with how many times it runs:

  * While: body ops x trip count, cond ops x (trip count + 1), plus the loop
    frame the runtime lowers the op to (per loop variable one Enter and one
    Exit, and per trip a Merge, Switch and NextIteration; a LoopCond per
    test; an Identity per argument and result of the inlined functions;
    a variable handle the body passes on gets an Enter alone). Only the
    live variables are counted, with the body ops they need: TF prunes a
    variable nothing reads (`_live_variables`), so that keras_lstm's
    forward loop runs 21 of its 44. The trip count is inferred where the
    graph makes it static (see `tfplace.graph.trip_counts` for the
    recognised patterns: a counter compared with a constant,
    `maximum_iterations`, gradient loops that run as many times as their
    forward loop), else taken from the user's `loop_trip_counts` ({loop
    name: trips}; a nested loop's name is its outer op's name, "/", its
    node name inside the body), else the import fails
    with a `GraphImportError` naming every such loop and the option. A count
    given for a top-level loop is recorded in its NodeDef (attr
    `_tfplace_trip_count`), so a graph written by `tfplace import` keeps it.
  * If/Case: the costliest branch (most FLOPs, then most bytes moved): a
    placement is then sized for the worst branch, and the predicted step
    time is an upper bound when the cheaper branch runs. Plus one Switch per
    input and one Merge per output.
  * Function calls inside bodies (PartitionedCall): the callee's ops, once.

Memory: a While's TensorList outputs (the accumulators that keep one tensor
per iteration for the gradient loop) get their real size, elements x
element bytes, instead of a handle's 8 bytes, so the activations the forward
loop hands to the backward loop are counted in memory and transfers; and the
op holds the working set of one body iteration while its outputs live
(`ControlFlowCost.working_bytes`). Iterations run one after another in the
cost (`parallel_iterations` overlap is not modelled).
"""

import dataclasses
from typing import Dict, List, Mapping, Optional, Set, Tuple

from absl import logging
import numpy as np

from tfplace.errors import GraphImportError
from tfplace.graph import trip_counts
from tfplace.graph.function_bodies import (ArgSpec, CALL_OPS, CASE_OPS,
                                           IF_OPS, WHILE_OPS, function_graph)
from tfplace.graph.loop_values import (EMPTY, FLOW_OPS, Frame, Loop,
                                      LoopValues)
from tfplace.graph.op_graph import (BodyOp, CONTROL_FLOW_OPS, ControlFlowCost,
                                   LOOP_FRAME)
from tfplace.graph.op_reader import op_shapes_and_flops, tensor_bytes
from tfplace.graph.trip_counts import Induction, through_identity

# NodeDef attr recording a trip count the user gave (read back at import).
TRIP_COUNT_ATTR = "_tfplace_trip_count"
BRANCH_FRAME = "(branch frame)"


class ControlFlowAnalysis(LoopValues):
  """Costs every functional control-flow op of an imported graph."""

  def __init__(self, graph, library: Mapping[str, object], name: str,
               unknown_dim: int = 1,
               loop_trip_counts: Optional[Mapping[str, int]] = None):
    """Prepares the analysis.

    Args:
      graph: the imported `tf.Graph`.
      library: its FunctionDefs by name.
      name: the graph's name (for messages).
      unknown_dim: size given to unknown dimensions.
      loop_trip_counts: {loop name: trip count} given by the user.
    """
    self.graph, self.library, self.name = graph, dict(library), name
    self.unknown_dim = unknown_dim
    self.given = _check_counts(dict(loop_trip_counts or {}), name)
    self.top = Frame(None)
    self._costs: Dict[Tuple[Frame, str], ControlFlowCost] = {}
    self._loops: Dict[Tuple[Frame, str], Loop] = {}
    self._handles: Dict[Tuple[Frame, str], object] = {}
    self._unresolved: Dict[str, Tuple[str, str, Optional[str]]] = {}
    self._loop_paths: List[str] = []
    self._blocker: Optional[str] = None
    self._static_cache = {}

  def analyze(self) -> Dict[str, ControlFlowCost]:
    """{op name: cost} of the top-level control-flow ops.

    Raises:
      GraphImportError: a loop's trip count is neither static nor given, a
        given name is not a loop, or a body cannot be read.
    """
    costs = {op.name: self.cost(op, self.top)
             for op in self.graph.get_operations()
             if op.type in CONTROL_FLOW_OPS}
    self._check()
    for op_name, cost in costs.items():
      if cost.trip_count is not None:
        logging.info("%s: loop %s runs %d times (%s), %.3g FLOPs", self.name,
                     op_name, cost.trip_count, cost.trip_count_source,
                     cost.flops)
    return costs

  # ---- costs -------------------------------------------------------------

  def cost(self, op, frame: Frame) -> ControlFlowCost:
    """The cost of control-flow (or call) op `op` living in `frame`."""
    key = (frame, op.name)
    if key not in self._costs:
      if op.type in WHILE_OPS:
        self._costs[key] = self._loop(op, frame).cost
      elif op.type in IF_OPS or op.type in CASE_OPS:
        self._costs[key] = self._branches(op, frame)
      else:
        self._costs[key] = self._call(op, frame)
    return self._costs[key]

  def _loop(self, op, frame: Frame) -> Loop:
    key = (frame, op.name)
    if key in self._loops:
      return self._loops[key]
    specs = self._specs(op, frame, list(op.inputs), loop=True)
    body = self._body(op.get_attr("body").name, specs, op, frame, 0, True)
    cond = self._body(op.get_attr("cond").name, specs, op, frame, 0, False)
    cond.invariant = body.invariant
    steps = {}
    for k, arg in enumerate(body.fg.args):
      step = trip_counts.loop_step(body.fg.outputs[k], arg)
      if step is not None:
        steps[k] = step
    loop = Loop(body, steps)
    self._loops[key] = loop
    loop.trips, source = self._trip_count(op, frame, cond, loop)
    n = loop.trips if loop.trips is not None else 1
    tested = _slice(cond.fg, [cond.fg.outputs[0]])[1]
    live, needed = _live_variables(op, body, tested)
    body_rows, body_work = self._rows(body, n, needed)
    cond_rows, cond_work = self._rows(cond, n + 1)
    # The lowering gives a resource the body passes on unchanged (a
    # variable's handle) an Enter alone; every other variable its frame.
    entered = {k for k in live if k in body.invariant
               and op.inputs[k].dtype.name == "resource"}
    nvars = len(live) - len(entered)
    # The inlined functions take each argument and give each result through
    # an Identity: per trip one for each live variable into the body, one
    # for each result out of it and one that starts the body, per test one
    # for each variable the condition reads and one for its result.
    forwards = (len(live) + nvars + 1) * n + (len(tested) + 1) * (n + 1)
    frame_rows = [BodyOp(f"{body.path}{LOOP_FRAME}", t, 0.0, 0, float(e))
                  for t, e in (("Enter", len(live)), ("Exit", nvars),
                               ("Merge", nvars * (n + 1)),
                               ("Switch", nvars * (n + 1)),
                               ("NextIteration", nvars * n),
                               ("LoopCond", n + 1), ("Identity", forwards))]
    self._remember_handles(op, frame, body)
    loop.cost = ControlFlowCost(
        tuple(body_rows + cond_rows + frame_rows), loop.trips, source,
        max(body_work, cond_work))
    return loop

  def _branches(self, op, frame: Frame) -> ControlFlowCost:
    if op.type in IF_OPS:
      names = [op.get_attr("then_branch").name, op.get_attr("else_branch").name]
    else:
      names = [f.name for f in op.get_attr("branches")]
    specs = self._specs(op, frame, list(op.inputs)[1:])
    best = None
    for fname in names:
      branch = self._body(fname, specs, op, frame, 1, False)
      rows, work = self._rows(branch, 1)
      key = (sum(r.flops * r.executions for r in rows),
             sum(r.bytes_moved * r.executions for r in rows))
      if best is None or key > best[0]:
        best = (key, branch, rows, work)
    _, branch, rows, work = best
    self._remember_handles(op, frame, branch)
    lowering = [BodyOp(f"{frame.path}{op.name}/{BRANCH_FRAME}", t, 0.0, 0,
                       float(e))
                for t, e in (("Switch", len(op.inputs) - 1),
                             ("Merge", len(op.outputs)))]
    return ControlFlowCost(tuple(rows + lowering), None, "", work)

  def _call(self, op, frame: Frame) -> ControlFlowCost:
    fname = op.get_attr("f").name if op.type in CALL_OPS else op.type
    specs = self._specs(op, frame, list(op.inputs))
    callee = self._body(fname, specs, op, frame, 0, False)
    rows, work = self._rows(callee, 1)
    self._remember_handles(op, frame, callee)
    return ControlFlowCost(tuple(rows), None, "", work)

  def _rows(self, frame: Frame, executions: int,
            needed: Optional[Set[str]] = None) -> Tuple[List[BodyOp], int]:
    """The ops of a body run `executions` times (those named in `needed`
    where given), and its working bytes."""
    rows, work = [], 0
    for op in frame.fg.ops:
      if needed is not None and op.name not in needed:
        continue
      name = frame.path + op.name
      shapes, in_shapes, flops = op_shapes_and_flops(op.node_def, op,
                                                     self.unknown_dim)
      out_bytes = sum(tensor_bytes(t.dtype, s)
                      for t, s in zip(op.outputs, shapes))
      work += out_bytes
      if op.type in FLOW_OPS or op.type in self.library:
        sub = self.cost(op, frame)
        rows.append(BodyOp(name, op.type, 0.0, 0, float(executions)))
        rows.extend(dataclasses.replace(r, executions=r.executions * executions)
                    for r in sub.ops)
        work += sub.working_bytes
        continue
      in_bytes = sum(tensor_bytes(t.dtype, s)
                     for t, s in zip(op.inputs, in_shapes))
      rows.append(BodyOp(name, op.type, float(flops), int(in_bytes + out_bytes),
                         float(executions)))
    return rows, work

  # ---- bodies ------------------------------------------------------------

  def _specs(self, op, frame: Frame, inputs, loop: bool = False):
    specs = []
    for k, t in enumerate(inputs):
      shape = t.shape
      if loop and k < len(op.outputs):
        out = op.outputs[k].shape
        shape = shape.merge_with(out) if shape.is_compatible_with(out) else out
      specs.append(ArgSpec(t.dtype, shape, self.handle_data(t, frame)))
    return specs

  def _body(self, fname: str, specs, op, frame: Frame, offset: int,
            loop: bool) -> Frame:
    import tensorflow as tf
    try:
      fg = function_graph(fname, self.library, specs)
    except (KeyError, ValueError, TypeError, tf.errors.OpError) as e:
      raise GraphImportError(
          f"{self.name}: cannot read function {fname!r} of "
          f"{frame.path + op.name!r} ({op.type}) to cost it: {e}") from None
    invariant = frozenset()
    if loop:
      invariant = frozenset(
          k for k, out in enumerate(fg.outputs)
          if k < len(fg.args) and through_identity(out) is fg.args[k])
    return Frame(fg, op, frame, f"{frame.path}{op.name}/", offset, invariant)

  def _remember_handles(self, op, frame: Frame, body: Frame) -> None:
    for k, t in enumerate(op.outputs):
      if k < len(body.fg.outputs) and t.dtype.name in ("variant", "resource"):
        self._handles[(frame, t.name)] = self.handle_data(body.fg.outputs[k],
                                                          body)

  def handle_data(self, tensor, frame: Frame):
    """The handle data (TensorList element or variable shape) of `tensor`."""
    if tensor.dtype.name not in ("variant", "resource"):
      return None
    from tensorflow.python.ops import handle_data_util
    data = handle_data_util.get_resource_handle_data(tensor)
    if data.is_set:
      return data
    t = through_identity(tensor)
    if t is not tensor:
      return self.handle_data(t, frame)
    if t.op.type == "TensorListPopBack" and t.value_index == 1:
      found = self._elements(t.op.inputs[0], frame, self.handle_data)
      return None if found is EMPTY else found
    if t.op.type in FLOW_OPS or t.op.type in self.library:
      self.cost(t.op, frame)
      return self._handles.get((frame, t.name))
    return None

  # ---- trip counts and static values -------------------------------------

  def _trip_count(self, op, frame: Frame, cond: Frame, loop: Loop):
    path = frame.path + op.name
    self._loop_paths.append(path)
    self._blocker = None
    trips, why = trip_counts.bound(
        cond.fg.outputs[0], lambda t: self._induction(t, op, frame, cond, loop),
        lambda t: self.static(t, cond))
    if path in self.given:
      if trips is not None and trips != self.given[path]:
        logging.warning("%s: loop %s: using the given trip count %d instead "
                        "of the inferred %d (%s)", self.name, path,
                        self.given[path], trips, why)
      return self.given[path], "given"
    attr = op.node_def.attr.get(TRIP_COUNT_ATTR)
    if frame is self.top and attr is not None:
      return int(attr.i), "recorded in the graph"
    if trips is None:
      self._unresolved[path] = (op.type, why, self._blocker)
    return trips, why

  def _induction(self, tensor, op, frame: Frame, cond: Frame,
                 loop: Loop) -> Optional[Induction]:
    k = cond.fg.arg_index(through_identity(tensor).op)
    if k is None or k not in loop.steps:
      return None
    sign, step_tensor = loop.steps[k]
    step = self.static(step_tensor, loop.body)
    init = self.static(op.inputs[k], frame)
    if step is None or init is None or np.size(step) != 1 or np.size(init) != 1:
      return None
    return Induction(float(np.reshape(init, ())),
                     sign * float(np.reshape(step, ())))

  # ---- errors ------------------------------------------------------------

  def _check(self) -> None:
    unknown = sorted(set(self.given) - set(self._loop_paths))
    if unknown:
      raise GraphImportError(
          f"{self.name}: loop_trip_counts names {unknown}, which "
          f"{'is not a While loop' if len(unknown) == 1 else 'are not While loops'}"
          f" of the graph; its loops are: {self._loop_paths or 'none'}")
    if not self._unresolved:
      return
    roots = {p: v for p, v in self._unresolved.items()
             if v[2] is None or v[2] not in self._unresolved}
    followers = sorted(set(self._unresolved) - set(roots))
    lines = [f"{p!r} ({v[0]}): {v[1]}" for p, v in sorted(roots.items())]
    example = ", ".join(f"{p!r}: N" for p in sorted(roots))
    flag = ",".join(f"{p}=N" for p in sorted(roots))
    message = (f"{self.name}: cannot cost functional control flow: the trip "
               f"count of {'this loop' if len(roots) == 1 else 'these loops'}"
               f" is not static: {'; '.join(lines)}. Give "
               f"{'it' if len(roots) == 1 else 'them'}: "
               f"import_graph(..., loop_trip_counts={{{example}}}) or "
               f"--loop_trip_counts={flag}")
    if followers:
      message += (f" (the trip count of {', '.join(map(repr, followers))} "
                  "then follows)")
    raise GraphImportError(message)


def _live_variables(op, body: Frame, tested: Set[int]
                    ) -> Tuple[Set[int], Set[str]]:
  """The loop variables of While `op` that its step computes (`tested`:
  those its condition reads), and the names of the body ops that compute
  them.

  TensorFlow prunes a loop variable whose output nothing reads and that no
  kept variable's update or the condition needs, with the body ops that
  only feed it: the accumulators a gradient loop does not read (keras_lstm's
  forward loop carries 44 variables, 33 of them accumulators; its traced
  step ran 21 of them and 11 of the accumulators: WORKSPACE_NOTES.md, issue
  13). Kept: the variables whose outputs are read, those the condition
  reads, the stateful body ops, and everything they need in the body,
  closed over the variables' updates.
  """
  fg = body.fg
  live = {k for k, t in enumerate(op.outputs) if t.consumers()} | tested
  stateful = [o for o in fg.ops if o.op_def.is_stateful]
  while True:
    roots = stateful + [fg.outputs[k] for k in live if k < len(fg.outputs)]
    needed, args = _slice(fg, roots)
    if args <= live:
      return live, needed
    live |= args


def _slice(fg, roots) -> Tuple[Set[str], Set[int]]:
  """Names of the ops of function graph `fg` that `roots` (tensors or
  ops) depend on, and the indices of the arguments they read."""
  seen, args = set(), set()
  stack = [getattr(r, "op", r) for r in roots]
  while stack:
    o = stack.pop()
    if o.name in seen:
      continue
    seen.add(o.name)
    k = fg.arg_index(o)
    if k is not None:
      args.add(k)
      continue
    stack.extend(t.op for t in o.inputs)
    stack.extend(o.control_inputs)
  return seen, args


def _check_counts(counts: Dict[str, int], name: str) -> Dict[str, int]:
  for loop, trips in counts.items():
    if isinstance(trips, bool) or not isinstance(trips, (int, np.integer)) \
        or trips < 0:
      raise GraphImportError(f"{name}: loop_trip_counts[{loop!r}] must be a "
                             f"whole number >= 0, got {trips!r}")
  return {k: int(v) for k, v in counts.items()}
