"""Real runs: timed steps, TF server clusters, batches, calibration.

`tfplace.measure` is both this package and the top-level function
`tfplace.measure(graph, placement, ...)` (`tfplace.measure.runner.measure`):
once the package is imported, Python binds the name `measure` on `tfplace` to
this module, so the module itself is made callable and forwards the call.
"""

import sys
import types


class _CallableModule(types.ModuleType):
  """This package, callable as `tfplace.measure.runner.measure`."""

  def __call__(self, *args, **kwargs):
    from tfplace.measure.runner import measure  # Lazy: imports TF helpers.
    return measure(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
