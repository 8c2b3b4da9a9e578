"""The device function putting each op of a traced step where a placement says.

The name rule. A placement names the ops of an `OpGraph` imported from a
`tf.function` (`tfplace.import_graph(fn, args=...)`) or from the step Keras
`fit` runs (`tfplace.apply.keras.import_fit_step`). Tracing the same Python
function again creates the same ops in the same order, and a graph names an
op by its name scope and op type, made unique by a counter that starts afresh
in every graph: so an op of the new trace has the name the import gave it.
In detail:

  * ops of the step's own graph: same name ("sequential/dense/MatMul",
    "gradient_tape/...", "Adam/AssignSubVariableOp");
  * a captured variable: its placeholder in the trace ("X/resource", named
    after the first op reading it) is the VarHandleOp "X/resource" of the
    import; "X/resource/initial_value", "X/resource/Assign" and "init" exist
    only in the import (they initialize the imported graph);
  * the function's arguments: Placeholders in the trace, Consts of the same
    name in the import;
  * a nested function call "C" (a tf.function called by the step): the import
    inlines its body as "C/<op>"; TF inlines it the same way when it runs
    the step, and ops of the body go to the device of the call op "C"
    (TF's default for a function body), so they are placed as a whole;
  * ops that the runtime adds (_Send/_Recv, "_Arg") have no name in either.

Names shift when the step builds different ops: another input signature
(import with the batch size fit uses, `None`), Keras layers named
automatically (a second model's "dense_1" is not the first's "dense"),
`jit_compile=True` (one XLA cluster). The `ApplyReport` counts what matched.

The device function is pushed with `graph.device(fn)`, which TF honours while
it traces a FuncGraph (`tf.compat.v1.device` documents device functions).
TF colocates the ops that read or update a resource variable with the
variable, whatever the device function says; `tfplace.apply` therefore checks
that the placement puts them on the variable's device.
"""

from typing import Dict, List, Mapping, Optional, Set

from tfplace.device_names import canonical_device
from tfplace.errors import ClusterError, PlacementError
from tfplace.placement import Placement

CALL_OPS = ("PartitionedCall", "StatefulPartitionedCall")


class PlacementDeviceFunction:
  """op -> device for the ops of one traced step that a placement names.

  Only ops of the step's graph are placed: a graph traced directly inside
  `outer_graph` (the FuncGraph of the wrapper `tfplace.apply` calls the step
  from). Ops of graphs nested in the step (function bodies, cond and while
  branches) keep the device they have, so they follow their call op.

  Attributes:
    step_graph: the step's FuncGraph (the latest traced), else None.
    placed: names of the ops given a device by the placement.
  """

  def __init__(self, placement: Placement, outer_graph):
    self._devices: Mapping[str, str] = placement.devices
    self._outer_graph = outer_graph
    self.step_graph = None
    self.placed: List[str] = []

  def __call__(self, op) -> str:
    graph = op.graph
    if graph is not self.step_graph:
      if _outer(graph) is not self._outer_graph:
        return op.device
      self.step_graph = graph
    device = self._devices.get(op.name)
    if device is None:
      return op.device
    self.placed.append(op.name)
    return device


def _outer(graph):
  return getattr(graph, "outer_graph", None)


def runtime_devices() -> Set[str]:
  """Full names of the devices this TensorFlow runtime has (local logical
  devices, and remote ones after `tfplace.apply.connect`)."""
  import tensorflow as tf
  out = set()
  for device in tf.config.list_logical_devices():
    try:
      out.add(canonical_device(device.name))
    except ClusterError:
      continue
  return out


def check_devices_exist(placement: Placement,
                        available: Optional[Set[str]] = None) -> None:
  """Raises PlacementError if the placement uses a device TF does not have.

  Args:
    placement: the placement.
    available: device names (default: `runtime_devices()`).
  """
  available = runtime_devices() if available is None else available
  counts: Dict[str, int] = placement.device_counts()
  missing = sorted(d for d in counts if d not in available)
  if missing:
    raise PlacementError(
        f"the placement puts {counts[missing[0]]} op(s) on {missing[0]}, "
        "which this TensorFlow runtime does not have (it has "
        f"{', '.join(sorted(available))}); configure the devices first "
        "(tf.config.set_logical_device_configuration for CPUs, "
        "tfplace.apply.connect for a cluster of TF servers)")
