"""Flag-free helpers shared by the verbs that run real steps (measure,
calibrate). Verb modules cannot import each other: their absl flags share
names, and absl rejects a second definition.
"""

import contextlib
import os
import sys
from typing import List, Optional, Tuple

from tfplace.errors import GraphImportError, TfplaceError


def load_graph_or_model(source: str):
  """A graph file, or a benchmark model name (GraphImportError if neither)."""
  from tfplace.models import registry
  if os.path.exists(source):
    from tfplace.graph.importers import import_graph
    return import_graph(source)
  if source in registry.list_models():
    return registry.build_model(source)
  raise GraphImportError(f"{source!r} is neither a graph file nor a model "
                         f"name ({', '.join(registry.list_models())})")


def servers_from_cluster_arg(value: str) -> Tuple[object, List[str]]:
  """(RemoteCluster, profiler addresses) of the servers --cluster names.

  A `tfplace cluster up` state file lists each worker's profiler address; a
  plain cluster spec does not, so its workers' server ports are used.
  """
  from tfplace.cli.cluster_arg import read_server_spec
  spec = read_server_spec(value)
  if spec is None:
    raise TfplaceError(f"--cluster {value!r} is neither a `tfplace cluster "
                       "up` state file nor a cluster spec JSON "
                       '({"worker": ["host:port", ...]})')
  remote = spec.remote()
  return remote, list(spec.profiler_addresses or remote.profiler_addresses)


def check_out_path(path: Optional[str], flag: str = "--out") -> None:
  """Raises TfplaceError unless `path` can be written (checked up front,
  before long work)."""
  if not path:
    raise TfplaceError(f"{flag} is required")
  parent = os.path.dirname(os.path.abspath(path))
  if os.path.isdir(path):
    raise TfplaceError(f"{flag} {path} is a directory")
  if not os.path.isdir(parent):
    raise TfplaceError(f"{flag} {path}: no such directory {parent}")
  if not os.access(parent, os.W_OK | os.X_OK):
    raise TfplaceError(f"{flag} {path}: directory {parent} is not writable")
  if os.path.exists(path) and not os.access(path, os.W_OK):
    raise TfplaceError(f"{flag} {path} exists and is not writable")


@contextlib.contextmanager
def native_stdout_to_stderr():
  """Sends what TF's C++ prints on stdout (e.g. the profiler's "Starting to
  trace ...") to stderr, so stdout holds only the result (`--json`)."""
  sys.stdout.flush()
  saved = os.dup(1)
  os.dup2(2, 1)
  try:
    yield
  finally:
    sys.stdout.flush()
    os.dup2(saved, 1)
    os.close(saved)
