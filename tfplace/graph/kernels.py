"""Device types with a registered kernel, per op type (cached)."""

import functools
from typing import FrozenSet

ANY_DEVICE: FrozenSet[str] = frozenset({"CPU", "GPU"})


@functools.lru_cache(maxsize=None)
def kernel_device_types(op_type: str) -> FrozenSet[str]:
  """Device types ("CPU", "GPU", ...) that can run `op_type`.

  A kernel registered for the DEFAULT device runs anywhere. Op types with no
  registered kernel (function calls by name, ops the runtime rewrites away)
  get {"CPU", "GPU"}: the placer does not restrict them. XLA's JIT
  registrations (`XLA_CPU_JIT`, ...) are compilation targets, not devices,
  and are left out; they appear once XLA has been loaded in the process.

  Args:
    op_type: a TF op type, e.g. "MatMul".

  Returns:
    A frozenset of device type names.
  """
  from tensorflow.python.framework import kernels  # Lazy: heavy import.
  try:
    registered = kernels.get_registered_kernels_for_op(op_type).kernel
  except Exception:  # pylint: disable=broad-except  (unknown op type)
    return ANY_DEVICE
  types = {k.device_type for k in registered
           if not k.device_type.endswith("_JIT")}
  if not types or "DEFAULT" in types:
    return ANY_DEVICE
  return frozenset(types)
