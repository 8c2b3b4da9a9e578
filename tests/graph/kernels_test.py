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


def test_xla_jit_registrations_are_not_devices():
  import tensorflow as tf
  # Compiling with XLA registers XLA_CPU_JIT kernels in this process.
  tf.function(lambda x: tf.matmul(x, x), jit_compile=True)(tf.ones((2, 2)))
  kernel_device_types.cache_clear()
  assert kernel_device_types("MatMul") == {"CPU", "GPU"}
