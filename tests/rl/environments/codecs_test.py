"""Actions <-> device per colocation group."""

import numpy as np
import pytest

from tfplace.errors import PlacementError
from tfplace.rl.environments.codecs import HierarchicalCodec, UnitCodec


def test_unit_codec_spreads_each_unit_to_its_members():
  allowed = np.ones((4, 3), bool)
  allowed[2, 1] = False
  codec = UnitCodec(np.array([0, 0, 1, 1]), allowed)
  # Unit 1 holds group 2, which may not use device 1.
  assert codec.allowed.tolist() == [[True] * 3, [True, False, True]]
  assert codec.action_spec().shape == (2,)
  np.testing.assert_array_equal(codec.decode(np.array([[2, 0], [1, 2]])),
                                [[2, 2, 0, 0], [1, 1, 2, 2]])
  np.testing.assert_array_equal(codec.encode(np.array([2, 2, 0, 0])), [2, 0])


def test_a_group_that_fits_nowhere_is_an_error():
  with pytest.raises(PlacementError, match="fits on no device"):
    UnitCodec(np.array([0]), np.zeros((1, 2), bool))


def test_hierarchical_decode_and_pinned_groups():
  allowed = np.ones((3, 2), bool)
  allowed[2] = [True, False]  # Group 2 only on device 0: pinned choices.
  codec = HierarchicalCodec(allowed, num_placer_groups=4)
  spec = codec.action_spec()
  assert spec["groups"].shape == (3,) and spec["groups"].maximum == 5
  assert spec["devices"].shape == (4,)
  action = {"groups": np.array([[3, 0, 4]]), "devices": np.array([[0, 1, 1, 0]])}
  # Group 0 -> group 3 -> device 0; group 1 -> group 0 -> device 0;
  # group 2 pinned to device 4 - 4 = 0.
  np.testing.assert_array_equal(codec.decode(action), [[0, 0, 0]])


def test_hierarchical_encode_reproduces_the_placement():
  allowed = np.ones((5, 3), bool)
  allowed[4] = [False, False, True]
  codec = HierarchicalCodec(allowed, num_placer_groups=6,
                            position=np.array([0.0, 0.3, 0.6, 0.9, 1.0]))
  devices = np.array([1, 0, 2, 1, 2])
  action = codec.encode(devices)
  batch = {k: v[None] for k, v in action.items()}
  np.testing.assert_array_equal(codec.decode(batch)[0], devices)
  assert action["groups"][4] == 6 + 2  # Pinned.
