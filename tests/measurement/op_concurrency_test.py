"""Tests for tfplace.measurement.op_concurrency."""

import numpy as np
import pytest

from tfplace.measurement.op_concurrency import (SHARE_EXPONENT, WIDE_OP_S,
                                                concurrency, solo_durations)
from tfplace.measurement.timing import OpRecord

CPU0 = "/job:worker/replica:0/task:0/device:CPU:0"
CPU1 = "/job:worker/replica:0/task:1/device:CPU:0"


def test_concurrency_is_the_time_average_count_over_an_op():
  records = [OpRecord("a", CPU0, 0.0, 100e-6),
             OpRecord("b", CPU0, 50e-6, 100e-6),  # half beside a
             OpRecord("c", CPU1, 0.0, 100e-6),  # another device
             OpRecord("d", CPU0, 300e-6, 0.0)]  # zero length
  # a: 50 us alone, 50 us beside b; b: 50 beside a, 50 alone.
  assert concurrency(records) == pytest.approx([1.5, 1.5, 1.0, 1.0])


def test_a_wide_op_beside_others_is_divided_and_a_narrow_one_is_not():
  wide, narrow = 4 * WIDE_OP_S, WIDE_OP_S / 2
  records = [OpRecord("conv", CPU0, 0.0, wide),
             OpRecord("conv_1", CPU0, 0.0, wide),  # the whole time beside
             OpRecord("add", CPU0, 0.0, narrow),
             OpRecord("alone", CPU1, 0.0, wide)]
  solo = solo_durations(records)
  # conv: 2 ops the whole time, a third for an eighth of it.
  c = 2.0 + narrow / wide
  assert solo[0] == pytest.approx(wide / c ** SHARE_EXPONENT)
  assert solo[1] == pytest.approx(solo[0])
  assert solo[2] == narrow  # Narrow: one thread, as traced.
  assert solo[3] == wide  # Nothing beside it.
  assert len(solo_durations([])) == 0


def test_ops_one_after_another_keep_their_traced_times():
  # A one-core worker runs one op at a time: nothing changes.
  durations = [1e-4, 2e-4, 3e-4, 4e-4]
  starts = np.concatenate([[0.0], np.cumsum(durations)[:-1]])
  records = [OpRecord(f"op{k}", CPU0, float(s), d)
             for k, (s, d) in enumerate(zip(starts, durations))]
  assert list(solo_durations(records)) == durations
