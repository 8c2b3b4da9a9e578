"""Use a placement where TF2 users train: a tf.function, Keras `fit`, a cluster.

`tfplace.apply(fn_or_model, placement, ...)` is `apply` below. This package
is also callable as that function: importing a submodule
(`tfplace.apply.keras`) makes `tfplace.apply` the package, and
`tfplace.apply(...)` must keep working.

Modules: `device_function` (the name rule and the device function),
`function` (a tf.function or Python step), `keras` (a Keras model's `fit`),
`variables` (variables created where placed), `report` (what matched, the
checks), `remote` (a cluster of TF servers), `devices_used` (the devices TF
used), `options`.
"""

import sys
import types
from typing import Callable, Optional, Sequence, Union

from tfplace.apply.devices_used import DeviceMatch, DevicesUsed, record_devices
from tfplace.apply.function import (PlacedFunction, apply_to_function,
                                    apply_with_factory)
from tfplace.apply.importing import import_step
from tfplace.apply.options import ApplyOptions
from tfplace.apply.remote import connect
from tfplace.apply.report import ApplyReport
from tfplace.errors import PlacementError
from tfplace.placement import Placement

__all__ = ["apply", "ApplyOptions", "ApplyReport", "PlacedFunction",
           "connect", "record_devices", "DevicesUsed", "DeviceMatch",
           "import_step", "import_fit_step"]


def import_fit_step(model, x, y, sample_weight=None, name=None):
  """The OpGraph of the step Keras `fit` runs (`tfplace.apply.keras`)."""
  from tfplace.apply.keras import import_fit_step as _import
  return _import(model, x, y, sample_weight=sample_weight, name=name)


def apply(fn_or_model, placement: Union[Placement, str], *,
          args: Optional[Sequence] = None, factory: bool = False,
          options: Optional[ApplyOptions] = None,
          compile_fn: Optional[Callable] = None):
  """Applies a placement to a training step, op by op, through tf.device.

  Args:
    fn_or_model: a `tf.function` or Python step function (its variables must
      already live where the placement puts them); with `factory=True`, a
      function that builds the step and its variables (called twice); or a
      compiled Keras model (a placed copy is returned; train it with `fit`).
    placement: a `Placement` (or the path of its JSON) of the step's
      imported graph: `tfplace.import_graph(step, args=...)` for a
      tf.function, `tfplace.apply.keras.import_fit_step(model, x, y)` for
      Keras `fit`.
    args: sample arguments of the step ((x, y) for a Keras model: needed);
      a tf.function is traced and checked now rather than at its first call.
    factory: `fn_or_model` builds the step (see above).
    options: `ApplyOptions`.
    compile_fn: compiles the Keras copy (default: the model's compile
      config).

  Returns:
    A `PlacedFunction` (call it like the step; `.report` after a trace), or
    for a Keras model its placed copy (`.train_function.report`).

  Raises:
    PlacementError: the placement does not fit the step (another model's op
      names, a device TF does not have, a variable split from its update or
      living elsewhere).
  """
  if isinstance(placement, str):
    placement = Placement.load(placement)
  if not isinstance(placement, Placement):
    raise PlacementError(f"not a Placement: {placement!r}")
  if _is_keras_model(fn_or_model):
    from tfplace.apply.keras import apply_to_model
    return apply_to_model(fn_or_model, placement, args, options, compile_fn)
  if factory:
    return apply_with_factory(fn_or_model, placement, options, args)
  return apply_to_function(fn_or_model, placement, options, args)


def _is_keras_model(obj) -> bool:
  if "tf_keras" not in sys.modules:
    return False
  import tf_keras
  return isinstance(obj, tf_keras.Model)


class _CallablePackage(types.ModuleType):
  """`tfplace.apply` stays callable once it is the package."""

  def __call__(self, *args, **kwargs):
    return apply(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
