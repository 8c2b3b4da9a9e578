"""The flags of every verb that runs real steps (measure, calibrate).

Defined once here (absl rejects a second definition of a flag name) and
adopted as key flags by each verb module, so `tfplace VERB --help` lists
them. Their defaults are `MeasureConfig`'s.
"""

from absl import flags

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


def measure_config(target: str) -> MeasureConfig:
  """The `MeasureConfig` the flags describe, on `target` (a TfplaceError
  for a bad value)."""
  return MeasureConfig(target=target, warmup=_WARMUP.value,
                       steps=_STEPS.value, timeout_s=_TIMEOUT.value,
                       step_timeout_s=_STEP_TIMEOUT.value)
