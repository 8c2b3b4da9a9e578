"""A placement applied to a `tf.function` or a Python step function.

`PlacedFunction` runs the step inside a wrapper `tf.function`: the wrapper
pushes the placement's device function and calls the step as a nested
`tf.function`, which TF traces with the wrapper's device functions in force
(so every op of the step, including the gradient and optimizer ops and the
step's output Identity ops, gets its device while it is traced) and inlines
at run time. After each trace it builds an `ApplyReport` and checks it.

    placed = tfplace.apply(train_step, placement)        # existing variables
    placed = tfplace.apply(make_step, placement, factory=True,
                           args=(x, y))              # variables placed
    loss = placed(x, y)

Variables must live where the placement puts their colocation group (see
`tfplace.apply.variables`): with `factory=True`, `make_step()` is called twice,
once to learn which variable becomes which op of the trace and once, under a
variable creator, to build the step with each variable on its device.
"""

import contextlib
from typing import Callable, Optional, Sequence, Tuple

from absl import logging

from tfplace.apply.device_function import (CALL_OPS, PlacementDeviceFunction,
                                           check_devices_exist)
from tfplace.apply.options import ApplyOptions
from tfplace.apply.report import ApplyReport, build_report, check_report
from tfplace.apply.variables import (VariableReplay, captured_variables,
                                     plan_variables, record_creations)
from tfplace.errors import PlacementError
from tfplace.placement import Placement


class PlacedFunction:
  """A step that runs with a placement applied op by op; call it like the step.

  Attributes:
    placement: the placement.
    options: the apply options.
    report: the `ApplyReport` of the latest trace (None before the first).
    built: what the factory returned (factory builds only).
  """

  def __init__(self, python_function: Callable, placement: Placement,
               options: Optional[ApplyOptions] = None, input_signature=None,
               reduce_retracing: bool = False,
               replay: Optional[VariableReplay] = None,
               signature_of: Optional[Callable[[tuple], list]] = None):
    """Wraps the step; nothing is traced yet.

    Args:
      python_function: the step.
      placement: the placement.
      options: apply options.
      input_signature: the step's input signature, if any.
      reduce_retracing: as in `tf.function`.
      replay: creates the variables made while tracing where planned.
      signature_of: makes the input signature from the first call's
        arguments (e.g. an iterator's element spec with the batch dimension
        relaxed, so that the trace is the imported one).

    Raises:
      PlacementError: the placement uses a device TF does not have.
    """
    import tensorflow as tf
    self.placement = placement
    self.options = options or ApplyOptions()
    self.report: Optional[ApplyReport] = None
    self.built = None
    self._replay = replay
    self._signature_of = signature_of
    self._reduce_retracing = reduce_retracing
    self._settings = None
    check_devices_exist(placement)
    self._step = tf.function(python_function, autograph=self.options.autograph,
                             input_signature=input_signature,
                             reduce_retracing=reduce_retracing)
    self._placed = (None if signature_of is not None
                    else self._placed_function(input_signature))

  def _placed_function(self, input_signature):
    import tensorflow as tf
    return tf.function(self._trace_placed, input_signature=input_signature,
                       autograph=False, reduce_retracing=self._reduce_retracing)

  def _function_for(self, args):
    if self._placed is None:
      self._placed = self._placed_function(self._signature_of(args))
    return self._placed

  def __call__(self, *args, **kwargs):
    with self._context():
      return self._function_for(args)(*args, **kwargs)

  def trace(self, *args, **kwargs) -> ApplyReport:
    """Traces the placed step for these arguments without running it."""
    with self._context():
      self._function_for(args).get_concrete_function(*args, **kwargs)
    return self.report

  @property
  def python_function(self) -> Callable:
    return self._step.python_function

  @contextlib.contextmanager
  def _context(self):
    """The variable plan (if any), soft placement off (unless asked) and the
    disabled grappler passes while the step is traced and run; TF's settings
    are set back to what they were at the first call (read once: reading
    them costs more than the rest of the call)."""
    import tensorflow as tf
    if self._settings is None:
      rewrites = tf.config.optimizer.get_experimental_options()
      self._settings = (tf.config.get_soft_device_placement(),
                        {name: rewrites.get(name, True)
                         for name in self.options.disabled_rewrites})
    soft, rewrites = self._settings
    with contextlib.ExitStack() as stack:
      if self._replay is not None and self._replay.pending:
        stack.enter_context(self._replay.scope())
      tf.config.set_soft_device_placement(self.options.soft_placement and soft)
      tf.config.optimizer.set_experimental_options(
          {name: False for name in rewrites})
      try:
        yield
      finally:
        tf.config.set_soft_device_placement(soft)
        tf.config.optimizer.set_experimental_options(rewrites)

  def _trace_placed(self, *args, **kwargs):
    import tensorflow as tf
    graph = tf.compat.v1.get_default_graph()
    device_fn = PlacementDeviceFunction(self.placement, graph)
    with graph.device(device_fn):
      outputs = self._step(*args, **kwargs)
    if device_fn.step_graph is None:
      raise PlacementError("the step created no ops to place")
    calls = [op.name for op in graph.get_operations() if op.type in CALL_OPS]
    report = build_report(
        device_fn.step_graph, self.placement,
        captured_variables(device_fn.step_graph, self.placement),
        call_prefix=calls[-1] if calls else "")
    self.report = report
    logging.info("tfplace.apply: %s", report.summary())
    check_report(report, self.placement, self.options)
    return outputs


def python_function_of(fn) -> Tuple[Callable, object]:
  """(Python function, input signature) of a tf.function or a callable."""
  if hasattr(fn, "function_def") and hasattr(fn, "graph"):
    raise PlacementError("give tfplace.apply the tf.function (or the Python "
                         "step function), not a ConcreteFunction")
  if hasattr(fn, "python_function"):
    return fn.python_function, getattr(fn, "input_signature", None)
  if not callable(fn):
    raise PlacementError(f"{fn!r} is not a step function, tf.function or "
                         "Keras model")
  return fn, None


def apply_to_function(fn, placement: Placement,
                      options: Optional[ApplyOptions] = None,
                      args: Optional[Sequence] = None) -> PlacedFunction:
  """The step `fn` with `placement` applied; its variables must already live
  where the placement puts them.

  Args:
    fn: a tf.function or a Python step function.
    placement: the placement of the step's imported graph.
    options: apply options.
    args: sample arguments: trace (and check) now rather than at the first
      call.

  Raises:
    PlacementError: see `check_report`.
  """
  python_fn, signature = python_function_of(fn)
  placed = PlacedFunction(python_fn, placement, options,
                          input_signature=signature)
  if args is not None:
    placed.trace(*args)
  return placed


def plan_build(build: Callable[[], object],
               trace: Callable[[object], object], placement: Placement,
               options: ApplyOptions):
  """A first build and trace of a step: the variable plan and its report.

  Args:
    build: makes the step (and its variables).
    trace: traces what `build` returned; returns the step's FuncGraph.
    placement: the placement.
    options: apply options.

  Returns:
    (plan of the variables' devices, `ApplyReport` of the first trace).

  Raises:
    PlacementError: the placement does not fit the trace.
  """
  with record_creations() as created:
    step_graph = trace(build())
  report = build_report(step_graph, placement,
                        captured_variables(step_graph, placement))
  check_report(report, placement, options, variable_devices=False)
  plan = plan_variables(created, step_graph, placement)
  logging.info("tfplace.apply: first build created %d variable(s); %s",
               len(plan), report.summary())
  return plan, report


def apply_with_factory(make: Callable[[], object], placement: Placement,
                       options: Optional[ApplyOptions] = None,
                       args: Optional[Sequence] = None) -> PlacedFunction:
  """Builds the step with `make()` so that its variables are created where
  the placement puts them, and applies the placement to it.

  Args:
    make: returns the step (a tf.function or Python function), or a tuple
      whose first item is the step (the whole result is `placed.built`).
    placement: the placement of the step's imported graph.
    options: apply options.
    args: sample arguments to trace the step with (not needed when the step
      is a tf.function with an input signature).

  Raises:
    PlacementError: the placement does not fit the step.
  """
  import tensorflow as tf
  options = options or ApplyOptions()
  check_devices_exist(placement)

  def trace(built):
    python_fn, signature = python_function_of(_step_of(built))
    fn = tf.function(python_fn, input_signature=signature,
                     autograph=options.autograph)
    return fn.get_concrete_function(*(args or ())).graph

  plan, _ = plan_build(make, trace, placement, options)
  replay = VariableReplay(plan)
  with replay.scope():
    built = make()
  python_fn, signature = python_function_of(_step_of(built))
  placed = PlacedFunction(python_fn, placement, options,
                          input_signature=signature, replay=replay)
  placed.built = built
  placed.trace(*(args or ()))
  return placed


def _step_of(built):
  return built[0] if isinstance(built, tuple) else built
