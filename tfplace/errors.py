"""Errors tfplace raises for bad input; the CLI turns each into exit status 2."""


class TfplaceError(Exception):
  """Base class: a user-facing error with a message that says what to do."""


class GraphImportError(TfplaceError):
  """A model or graph file could not be read as a TensorFlow training graph."""


class PlacementError(TfplaceError):
  """A placement is malformed or does not fit the graph or cluster."""


class ClusterError(TfplaceError):
  """A cluster description is malformed or physically impossible."""


class MeasureError(TfplaceError):
  """A real run failed: a worker died, timed out or could not be reached."""


class TraceError(TfplaceError):
  """A profiler trace is missing, empty or corrupt."""


class OutputError(TfplaceError):
  """An output file or directory cannot be written."""


class Interrupted(TfplaceError):
  """The user interrupted the run (Ctrl-C); nothing more is written."""


class FeedError(TfplaceError):
  """A feed or input option does not fit the graph's inputs (placeholders)."""


class WorkerDiedError(MeasureError):
  """A worker of a TF server cluster died during a real run.

  Attributes:
    dead_tasks: one line per dead worker ("worker task 1 (host:port): ...").
    step_times_s: the steps timed before it died, in order.
  """

  def __init__(self, message: str, dead_tasks=(), step_times_s=()):
    super().__init__(message)
    self.dead_tasks = tuple(dead_tasks)
    self.step_times_s = tuple(step_times_s)
