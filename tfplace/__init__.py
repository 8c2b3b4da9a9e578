"""tfplace: a TensorFlow-native device-placement optimizer.

Importing tfplace sets ``TF_USE_LEGACY_KERAS=1`` (unless already set) before
TensorFlow is first imported: tf-agents and TensorFlow Probability need the
Keras 2 API (``tf-keras``), and TensorFlow reads the variable only once, at its
own import. Import tfplace before TensorFlow, or export the variable yourself.
"""

import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

if "tensorflow" in sys.modules and os.environ.get("TF_USE_LEGACY_KERAS") != "1":
  import warnings
  warnings.warn(
      "TensorFlow was imported before tfplace without TF_USE_LEGACY_KERAS=1; "
      "tf-agents based placers need it. Import tfplace first or export "
      "TF_USE_LEGACY_KERAS=1.")

__version__ = "0.1.0"

# Public API, resolved lazily so that `import tfplace` stays cheap and free of
# import cycles.
_API = {
    "OpGraph": "tfplace.graph.op_graph",
    "import_graph": "tfplace.graph.importers",
    "Placement": "tfplace.placement",
    "Cluster": "tfplace.cost.cluster",
    "Device": "tfplace.cost.cluster",
    "Link": "tfplace.cost.cluster",
    "load_cluster": "tfplace.cost.presets",
    "simulate": "tfplace.pipeline",
    "Simulator": "tfplace.simulator.simulator",
    "place": "tfplace.pipeline",
    "measure": "tfplace.measurement.runner",
    "MeasureConfig": "tfplace.measurement.config",
    "FeedOptions": "tfplace.measurement.feeds",
    "measure_batch": "tfplace.measurement.batch",
    "LocalCluster": "tfplace.measurement.local_cluster",
    "RemoteCluster": "tfplace.measurement.local_cluster",
    "get_cost_model": "tfplace.cost.cost_models",
    "lower_bound": "tfplace.simulator.lower_bound",
    "load_trace": "tfplace.trace.reader",
    "summarize": "tfplace.trace.summary",
    "split_steps": "tfplace.trace.steps",
    "build_model": "tfplace.models.registry",
    "apply": "tfplace.apply",
    "verify_top_k": "tfplace.real.verify",
    "VerifySettings": "tfplace.real.verify",
    "place_on_target": "tfplace.real.api",
    "RealRewardSettings": "tfplace.real.fine_tune",
}


def __getattr__(name):
  if name in _API:
    import importlib
    module = importlib.import_module(_API[name])
    if _API[name] == f"{__name__}.{name}":  # a callable package: tfplace.apply
      return module
    return getattr(module, name)
  raise AttributeError(f"module 'tfplace' has no attribute {name!r}")


def __dir__():
  return sorted(list(globals()) + list(_API))
