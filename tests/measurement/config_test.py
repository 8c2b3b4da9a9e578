"""Tests for `MeasureConfig`'s checks of its values."""

import pytest

from tfplace.errors import MeasureError
from tfplace.measurement.config import MAX_TIMEOUT_S, MeasureConfig


@pytest.mark.parametrize("field", ["timeout_s", "step_timeout_s",
                                   "health_interval_s"])
@pytest.mark.parametrize("value", [float("inf"), 1e300, float("nan"), 0.0])
def test_a_deadline_that_is_not_a_finite_positive_time_is_refused(field,
                                                                  value):
  # `tfplace measure --timeout_s inf` aborted the process (Python's thread
  # wait overflowed: "Fatal Python error"), `--step_timeout_s inf` was an
  # OverflowError traceback (TF's deadline in ms).
  with pytest.raises(MeasureError, match=f"{field} must be > 0 and at most"):
    MeasureConfig(**{field: value})


def test_the_longest_deadline_is_taken():
  assert MeasureConfig(timeout_s=MAX_TIMEOUT_S).timeout_s == MAX_TIMEOUT_S


@pytest.mark.parametrize("target, hint", [
    ("127.0.0.1:2222", "(grpc://127.0.0.1:2222?)"),
    ("http://127.0.0.1:2222", "not grpc://host:port;"),
    ("localhost", "not grpc://host:port;")])
def test_a_target_that_is_not_grpc_is_refused(target, hint):
  # A bare host:port reached TF, whose C++ logged two lines and said "No
  # session factory registered for the given session options".
  with pytest.raises(MeasureError, match="is not grpc://host:port") as e:
    MeasureConfig(target=target)
  assert hint in str(e.value)


def test_grpc_and_in_process_targets_are_taken():
  assert MeasureConfig(target="grpc://127.0.0.1:2222").remote
  assert not MeasureConfig().remote


def test_local_is_this_process_as_for_place():
  # `place --target local` ran in this process; `measure --target local`
  # was refused ("not grpc://host:port").
  config = MeasureConfig(target="local")
  assert config.target == "" and not config.remote
