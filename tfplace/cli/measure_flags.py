"""The flags of every verb that runs real steps (measure, calibrate).

Defined once here (absl rejects a second definition of a flag name) and
adopted as key flags by each verb module, so `tfplace VERB --help` lists
them. Their defaults are `MeasureConfig`'s and `FeedOptions`'.

Inputs: every placeholder the step needs gets a synthetic value of its dtype
and shape (unknown dimensions from --batch_size / --input_shapes, see
`input_flags`; integer inputs used as indices stay in the range the graph
implies, or the one --index_ranges gives) unless --feeds FILE.npz holds an array for it.
"""

from typing import List

from absl import flags

from tfplace.cli import input_flags
from tfplace.measurement.config import MeasureConfig

_WARMUP = flags.DEFINE_integer("warmup", MeasureConfig.warmup,
                               "untimed steps per placement")
_STEPS = flags.DEFINE_integer("steps", MeasureConfig.steps,
                              "timed steps per placement (the median is used)")
_TIMEOUT = flags.DEFINE_float(
    "timeout_s", MeasureConfig.timeout_s,
    "deadline of the whole measurement of one placement, in seconds")
_STEP_TIMEOUT = flags.DEFINE_float(
    "step_timeout_s", MeasureConfig.step_timeout_s,
    "deadline of each single step run, in seconds")
_FEEDS = flags.DEFINE_string(
    "feeds", None, ".npz file (np.savez) of placeholder name -> array, fed "
    "to every step; placeholders it lacks get synthetic values")
_INDEX_RANGES = flags.DEFINE_list(
    "index_ranges", [], "integer placeholders drawn from [0, N), e.g. "
    "labels=10 (default: the range the graph implies, else zeros)")


def measure_config(target: str, workers=()) -> MeasureConfig:
  """The `MeasureConfig` the flags describe, on `target` whose cluster has
  the servers `workers` (a TfplaceError for a bad value)."""
  return MeasureConfig(target=target, warmup=_WARMUP.value,
                       steps=_STEPS.value, timeout_s=_TIMEOUT.value,
                       step_timeout_s=_STEP_TIMEOUT.value,
                       workers=tuple(workers))


def step_inputs(graph):
  """The `StepInputs` the flags describe for `graph`: the --feeds arrays,
  synthetic values for the rest (a FeedError names what is wrong)."""
  from tfplace.measurement import feeds
  sizes = input_flags.import_kwargs()
  options = feeds.FeedOptions(
      batch_size=sizes["batch_size"], input_shapes=sizes["input_shapes"],
      index_ranges=feeds.parse_index_ranges(_INDEX_RANGES.value))
  given = feeds.load_feeds(_FEEDS.value) if _FEEDS.value else None
  return feeds.resolve_inputs(graph, given, options)


def input_lines(inputs) -> List[str]:
  """"inputs: ..." lines for the text output of a verb."""
  if not inputs.sources:
    return ["inputs: made in the graph (no feeds, no input pipeline)"]
  return [f"input {line}" for line in inputs.describe()]
