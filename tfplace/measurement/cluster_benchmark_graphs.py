"""The graphs `cluster_benchmark` runs: one tf.Graph, a part per device and
per ordered pair of devices, each part run through its own fetches.

Every part is pinned to its devices. Fetches are op names run as targets
(nothing is fetched back to the client) except the empty steps', which
fetch a scalar as a training step fetches its loss. An accelerator's part
has GPU-sized matmuls and convolutions (`BenchmarkConfig.
accelerator_matmul_size`, `accelerator_conv_shape`) and, per launch kind
(`tfplace.cost.launch_kinds`), a chain of small ops of that kind, each
after the one before (by data or by a control edge): the host launches a
GPU op and goes on while its kernel runs, so a chain of ops whose kernels
are shorter than their launches measures the launch.
"""

import dataclasses
from typing import Dict, List, Sequence, Tuple

from tfplace.device_names import device_type_of


@dataclasses.dataclass(frozen=True)
class DeviceGraphs:
  """Fetches of one device's microbenchmarks.

  Attributes:
    empty: a scalar made on the device and fetched (what a one-device step
      costs besides its ops: the run and the loss fetch).
    tiny, tiny_ops: the chain of tiny scalar adds (its last value fetched,
      as `empty`; its ops).
    matmul, matmul_ops, matmul_flops: the matmul chain, FLOPs per matmul.
    conv, conv_ops, conv_flops: the convolution chain, FLOPs per conv.
    narrow, narrow_ops, narrow_flops, narrow_channels: the same
      convolutions with `narrow_channels` output channels (independent ops
      on the chain's input), FLOPs per conv.
    copy, copy_ops, copy_bytes: the element-wise chain, bytes each op reads
      and writes.
    uniform, uniform_ops, normal, normal_ops, random_values: independent
      uniform (`RandomUniform`, dropout's op) and normal
      (`RandomStandardNormal`) random ops of `random_values` float32 values
      each.
    launch: on an accelerator, launch kind -> (fetch, ops) of its chain of
      small ops; empty on CPUs.
    conv_grad_op, conv_grad_buffer: on a CPU, one convolution's filter
      gradient (`CONV_GRAD_PROBE`; also its fetch) and the patch buffer
      TF's own kernel takes for it (`tfplace.cost.scratch`); empty on
      accelerators.
  """
  empty: Tuple[str, ...]
  tiny: Tuple[str, ...]
  tiny_ops: Tuple[str, ...]
  matmul: Tuple[str, ...]
  matmul_ops: Tuple[str, ...]
  matmul_flops: float
  conv: Tuple[str, ...]
  conv_ops: Tuple[str, ...]
  conv_flops: float
  narrow: Tuple[str, ...]
  narrow_ops: Tuple[str, ...]
  narrow_flops: float
  narrow_channels: int
  copy: Tuple[str, ...]
  copy_ops: Tuple[str, ...]
  copy_bytes: float
  uniform: Tuple[str, ...] = ()
  uniform_ops: Tuple[str, ...] = ()
  normal: Tuple[str, ...] = ()
  normal_ops: Tuple[str, ...] = ()
  random_values: int = 0
  launch: Dict[str, Tuple[Tuple[str, ...], Tuple[str, ...]]] = (
      dataclasses.field(default_factory=dict))
  conv_grad_op: str = ""
  conv_grad_buffer: int = 0


@dataclasses.dataclass(frozen=True)
class PairGraphs:
  """Fetches of one ordered pair's microbenchmarks (src a, dst b).

  Attributes:
    fanout_one, fanout_many: 1 and `messages` scalars sent a -> b.
    messages: the messages of `fanout_many`.
    pingpong_short, pingpong_long: chains of tiny ops alternating b, a.
    short_hops, long_hops: their hops (device changes).
    transfers: bytes -> (fetch with the consumer on b, fetch with it on a).
  """
  fanout_one: Tuple[str, ...]
  fanout_many: Tuple[str, ...]
  messages: int
  pingpong_short: Tuple[str, ...]
  pingpong_long: Tuple[str, ...]
  short_hops: int
  long_hops: int
  transfers: Dict[int, Tuple[Tuple[str, ...], Tuple[str, ...]]]


@dataclasses.dataclass(frozen=True)
class BenchmarkGraphs:
  """The graph and the fetches of every part."""
  graph: object
  devices: Dict[str, DeviceGraphs]
  pairs: Dict[Tuple[str, str], PairGraphs]
  empty_all: Tuple[str, ...]  # a NoOp on every device, a scalar fetched
  #                              from the last one


def build(devices: Sequence[str], bench) -> BenchmarkGraphs:
  """Builds the benchmark graph for `devices` with the sizes of `bench`
  (a `cluster_benchmark.BenchmarkConfig`)."""
  import tensorflow as tf
  graph = tf.Graph()
  with graph.as_default():
    parts = {}
    for i, device in enumerate(devices):
      with tf.name_scope(f"bench_device_{i}"), tf.device(device):
        parts[device] = _device_part(bench, device_type_of(device) != "CPU")
    pairs = {}
    for i, a in enumerate(devices):
      for j, b in enumerate(devices):
        if i != j:
          with tf.name_scope(f"bench_pair_{i}_{j}"):
            pairs[(a, b)] = _pair_part(a, b, bench)
    noops = []
    for i, device in enumerate(devices):
      with tf.device(device):
        noops.append(tf.no_op(name=f"bench_noop_{i}"))
    with tf.device(devices[-1]):
      with tf.control_dependencies(noops):
        fetched = tf.random.stateless_uniform([], seed=[1, 9],
                                              name="bench_empty_all")
  return BenchmarkGraphs(graph, parts, pairs, (fetched.name,))


def _chain(x, op, count: int) -> Tuple[object, List[str]]:
  names = []
  for _ in range(count):
    x = op(x)
    names.append(x.op.name)
  return x, names


def _device_part(bench, accelerator: bool) -> DeviceGraphs:
  import tensorflow as tf
  empty = tf.random.stateless_uniform([], seed=[1, 1], name="empty")
  one = tf.constant(1.0, name="one")
  seed = tf.random.stateless_uniform([], seed=[1, 2], name="scalar")
  tiny, tiny_ops = _chain(seed, lambda x: tf.add(x, one), bench.tiny_ops)
  n = bench.accelerator_matmul_size if accelerator else bench.matmul_size
  a = tf.random.stateless_normal([n, n], seed=[1, 3]) * (n ** -0.5)
  mm, mm_ops = _chain(a, lambda x: tf.matmul(x, a), bench.chain_ops)
  b, size, c = (bench.accelerator_conv_shape if accelerator
                else bench.conv_shape)
  img = tf.random.stateless_normal([b, size, size, c], seed=[1, 4])
  w = tf.random.stateless_normal([3, 3, c, c], seed=[1, 5]) * (9 * c) ** -0.5
  cv, cv_ops = _chain(img, lambda x: tf.nn.conv2d(x, w, 1, "SAME"),
                      bench.chain_ops)
  k = bench.narrow_channels
  narrow_w = tf.random.stateless_normal([3, 3, c, k], seed=[1, 6]) * (
      9 * c) ** -0.5
  narrow = [tf.nn.conv2d(img, narrow_w, 1, "SAME")
            for _ in range(bench.chain_ops)]
  narrow_all = tf.group(*narrow, name="narrow_convs")
  filled = tf.fill([bench.copy_elements], 1.0)
  cp, cp_ops = _chain(filled, lambda x: tf.add(x, one), bench.chain_ops)
  values = bench.random_values
  uniform = [tf.random.uniform([values], seed=i + 1)
             for i in range(bench.chain_ops)]
  normal = [tf.random.normal([values], seed=i + 1)
            for i in range(bench.chain_ops)]
  uniform_all = tf.group(*uniform, name="random_uniforms")
  normal_all = tf.group(*normal, name="random_normals")
  return DeviceGraphs(
      empty=(empty.name,), tiny=(tiny.name,), tiny_ops=tuple(tiny_ops),
      matmul=(mm.op.name,), matmul_ops=tuple(mm_ops),
      matmul_flops=2.0 * n ** 3, conv=(cv.op.name,), conv_ops=tuple(cv_ops),
      conv_flops=2.0 * b * size * size * c * 9 * c,
      narrow=(narrow_all.name,), narrow_ops=tuple(x.op.name for x in narrow),
      narrow_flops=2.0 * b * size * size * c * 9 * k, narrow_channels=k,
      copy=(cp.op.name,),
      copy_ops=tuple(cp_ops), copy_bytes=8.0 * bench.copy_elements + 4.0,
      uniform=(uniform_all.name,),
      uniform_ops=tuple(_random_op(x).name for x in uniform),
      normal=(normal_all.name,),
      normal_ops=tuple(_random_op(x).name for x in normal),
      random_values=values,
      launch=_launch_chains(bench.launch_ops) if accelerator else {},
      **({} if accelerator else _conv_grad_probe()))


# (batch, height = width, channels in = out) of the probe's 3x3 convolution:
# TF's own CPU kernel takes a 32 MiB patch buffer for its filter gradient.
CONV_GRAD_PROBE = (8, 32, 16)


def _conv_grad_probe() -> dict:
  """`DeviceGraphs`' conv_grad_* fields: a filter gradient of
  `CONV_GRAD_PROBE` and the buffer the model gives it."""
  import tensorflow as tf
  from tfplace.cost.scratch import cpu_filter_gradient_scratch
  from tfplace.graph.conv_geometry import ConvGeometry
  b, size, c = CONV_GRAD_PROBE
  x = tf.random.stateless_normal([b, size, size, c], seed=[1, 7])
  dy = tf.random.stateless_normal([b, size, size, c], seed=[1, 8])
  grad = tf.raw_ops.Conv2DBackpropFilter(
      input=x, filter_sizes=[3, 3, c, c], out_backprop=dy,
      strides=[1, 1, 1, 1], padding="SAME", name="conv_grad_probe")
  geometry = ConvGeometry(batch=b, out_pixels=size * size, window=9 * c,
                          out_channels=c, dtype_bytes=4)
  return {"conv_grad_op": grad.op.name,
          "conv_grad_buffer": cpu_filter_gradient_scratch(geometry)}


def _random_op(tensor):
  """The generator op behind `tf.random.uniform` / `normal`'s tensor (they
  scale and shift its values after it)."""
  op = tensor.op
  while not op.type.startswith("Random"):
    op = op.inputs[0].op
  return op


def _launch_chains(count: int
                   ) -> Dict[str, Tuple[Tuple[str, ...], Tuple[str, ...]]]:
  """Per launch kind, a chain of `count` small ops of that kind (shapes of
  the calibration suite's: batch 8, 16 x 16, 16 channels), each after the
  one before: (fetch, ops). The element-wise kind is the tiny chain's."""
  import tensorflow as tf
  from tfplace.cost.launch_kinds import (BATCH_NORM, BATCH_NORM_GRAD, CONV,
                                         CONV_FILTER, CONV_INPUT, MATMUL,
                                         NO_KERNEL)
  shape = [8, 16, 16, 16]
  # Every input is made once, outside the chains: a chain holds only ops of
  # its kind.
  x = tf.random.stateless_normal(shape, seed=[3, 1])
  w = tf.random.stateless_normal([3, 3, 16, 16], seed=[3, 2]) * 0.1
  m = tf.random.stateless_normal([64, 64], seed=[3, 3]) * 0.125
  scale, offset, empty = tf.ones([16]), tf.zeros([16]), tf.zeros([0])
  input_sizes = tf.constant(shape)
  filter_sizes = tf.constant([3, 3, 16, 16])
  strides = [1, 1, 1, 1]

  def batch_norm(v):
    return tf.raw_ops.FusedBatchNormV3(x=v, scale=scale, offset=offset,
                                       mean=empty, variance=empty,
                                       is_training=True).y

  reserve = tf.raw_ops.FusedBatchNormV3(x=x, scale=scale, offset=offset,
                                        mean=empty, variance=empty,
                                        is_training=True)

  def batch_norm_grad(v):
    return tf.raw_ops.FusedBatchNormGradV3(
        y_backprop=v, x=x, scale=scale,
        reserve_space_1=reserve.reserve_space_1,
        reserve_space_2=reserve.reserve_space_2,
        reserve_space_3=reserve.reserve_space_3, is_training=True)[0]

  def conv_filter(_):
    return tf.raw_ops.Conv2DBackpropFilter(
        input=x, filter_sizes=filter_sizes, out_backprop=x, strides=strides,
        padding="SAME")

  makers = {
      CONV: lambda v: tf.raw_ops.Conv2D(input=v, filter=w, strides=strides,
                                        padding="SAME"),
      CONV_INPUT: lambda v: tf.raw_ops.Conv2DBackpropInput(
          input_sizes=input_sizes, filter=w, out_backprop=v,
          strides=strides, padding="SAME"),
      CONV_FILTER: conv_filter,
      BATCH_NORM: batch_norm, BATCH_NORM_GRAD: batch_norm_grad,
      MATMUL: lambda v: tf.matmul(v, m),
      NO_KERNEL: tf.identity,
  }
  start = {MATMUL: m}
  out = {}
  for kind, make in makers.items():
    with tf.name_scope(f"launch_{kind}"):
      v, names = start.get(kind, x), []
      for _ in range(count):
        # A control edge keeps the order where the op's output cannot feed
        # the next (a filter gradient).
        with tf.control_dependencies([v.op] if names else []):
          v = make(v)
        names.append(v.op.name)
      out[kind] = ((v.op.name,), tuple(names))
  return out


def _fanout(a: str, b: str, count: int, name: str) -> str:
  import tensorflow as tf
  with tf.name_scope(name):
    with tf.device(a):
      base = tf.random.stateless_uniform([], seed=[2, 1])
      sent = [base + float(k) for k in range(count)]
    with tf.device(b):
      got = [x * 2.0 for x in sent]
      return tf.add_n(got).op.name


def _pingpong(a: str, b: str, hops: int, name: str) -> str:
  import tensorflow as tf
  with tf.name_scope(name):
    with tf.device(a):
      x = tf.random.stateless_uniform([], seed=[2, 2])
    for k in range(hops):
      with tf.device(b if k % 2 == 0 else a):
        x = x + 1.0
    return x.op.name


def _transfer(a: str, b: str, nbytes: int, name: str) -> str:
  import tensorflow as tf
  with tf.name_scope(name):
    with tf.device(a):
      payload = tf.fill([max(1, nbytes // 4)], 1.0)
    with tf.device(b):
      return tf.strided_slice(payload, [0], [1]).op.name


def _pair_part(a: str, b: str, bench) -> PairGraphs:
  short, long = 2, 2 + 2 * (bench.messages // 2)
  transfers = {
      int(n): ((_transfer(a, b, n, f"split_{n}"),),
               (_transfer(a, a, n, f"local_{n}"),))
      for n in bench.transfer_sizes}
  return PairGraphs(
      fanout_one=(_fanout(a, b, 1, "fanout_one"),),
      fanout_many=(_fanout(a, b, bench.messages, "fanout_many"),),
      messages=bench.messages,
      pingpong_short=(_pingpong(a, b, short, "pingpong_short"),),
      pingpong_long=(_pingpong(a, b, long, "pingpong_long"),),
      short_hops=short, long_hops=long, transfers=transfers)
