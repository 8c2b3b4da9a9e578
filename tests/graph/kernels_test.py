"""Tests for tfplace.graph.kernels."""

import tfplace  # noqa: F401

from tfplace.graph.kernels import kernel_device_types


def test_registered_kernels():
  assert kernel_device_types("MatMul") == {"CPU", "GPU"}
  assert kernel_device_types("StringJoin") == {"CPU"}
  assert kernel_device_types("SaveV2") == {"CPU"}


def test_default_and_unregistered_run_anywhere():
  assert kernel_device_types("Placeholder") == {"CPU", "GPU"}  # DEFAULT
  assert kernel_device_types("NoSuchOpType") == {"CPU", "GPU"}
