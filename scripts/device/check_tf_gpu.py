"""Does TensorFlow run on this machine's GPU, and agree with its CPU?

Run on a lent GPU machine after `source .gpu/setup.sh` (see setup.sh):
prints TF's devices and build, the GPU's name, the largest relative
difference between CPU and GPU results of a 512x512 matmul, a 3x3
convolution (8x32x32x16 -> 32) and its input gradient, and an 8192^3
matmul's time on the GPU. Exits 3 where TF sees no GPU.
"""

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def _results(device, a, x, k):
  with tf.device(device):
    xv = tf.constant(x)
    with tf.GradientTape() as tape:
      tape.watch(xv)
      y = tf.nn.conv2d(xv, k, 1, "SAME")
      loss = tf.reduce_sum(y * y)
    grad = tape.gradient(loss, xv)
    return tf.matmul(a, a).numpy(), y.numpy(), grad.numpy()


def main():
  print("TensorFlow", tf.__version__, {
      k: v for k, v in tf.sysconfig.get_build_info().items()
      if "version" in k})
  gpus = tf.config.list_physical_devices("GPU")
  print("devices:", [d.name for d in tf.config.list_physical_devices()])
  if not gpus:
    print("TF sees no GPU", file=sys.stderr)
    return 3
  print("GPU:", tf.config.experimental.get_device_details(gpus[0]))
  rng = np.random.default_rng(0)
  a = rng.standard_normal((512, 512), dtype=np.float32)
  x = rng.standard_normal((8, 32, 32, 16), dtype=np.float32)
  k = rng.standard_normal((3, 3, 16, 32), dtype=np.float32)
  cpu, gpu = _results("/cpu:0", a, x, k), _results("/gpu:0", a, x, k)
  for what, c, g in zip(("matmul", "conv", "conv input gradient"), cpu, gpu):
    print(f"{what}: max |cpu - gpu| / max |cpu| = "
          f"{float(np.abs(c - g).max() / np.abs(c).max()):.1e}")
  with tf.device("/gpu:0"):
    m = tf.random.normal((8192, 8192))
    tf.matmul(m, m).numpy()
    start = time.perf_counter()
    for _ in range(10):
      r = tf.matmul(m, m)
    r.numpy()
    dt = (time.perf_counter() - start) / 10
  print(f"8192^3 matmul on the GPU: {dt * 1e3:.2f} ms, "
        f"{2 * 8192**3 / dt / 1e12:.0f} TFLOP/s (TF32: "
        f"{tf.config.experimental.tensor_float_32_execution_enabled()})")
  return 0


if __name__ == "__main__":
  sys.exit(main())
