"""Small constants TensorFlow copies to their consumers' devices.

Before it partitions a placed graph, TF's runtime (since TF 2.14; the
graph optimization pass `ReplicateConstantsPass`, default on) gives a
small constant read on several devices a copy of its own on each, so no
Send/Recv carries it. A `Const` is copied when:

* it holds at most `MAX_ELEMENTS` elements (a shape, an axis, a scalar);
* it has at least two data edges out and no control edge out;
* it is placed on a CPU;
* its consumers are on at least two "hosts": a consumer on a CPU is its
  own host (TF's `enable_aggressive_constant_replication`, default on:
  every logical CPU of one process too), a consumer on an accelerator
  belongs to its task's CPU.

Then every consumer on a CPU reads a copy on its own device. A consumer on
an accelerator still receives it from a CPU (its task's, where the copy
is); the simulator keeps that transfer from the constant's device.

Measured (2026-11-29, the partition graphs of every split placement of a
cross record on two TF server workers, `scripts/message_count.py`): such
constants (split axes, concat shapes, reshape targets) showed up as
"<name>/replicate/_N" on each consumer's worker, and sent nothing; one
message per remote consumer device counted 3-28 too many on RNNLM's
placements, up to 55 on MobileNetV2's. With them (and
`dead_accumulators`) the simulator's count is TF's on 99 of 99.
"""

from typing import Sequence

import numpy as np

from tfplace.graph.op_graph import OpGraph

# TF's `kMaxSize`: constants of more elements are sent as any tensor.
MAX_ELEMENTS = 16
# Op types TF's `Node::IsConstant` is true of.
CONSTANT_TYPES = frozenset({"Const", "HostConst"})


def replicable_constants(graph: OpGraph, step: np.ndarray) -> np.ndarray:
  """bool [M]: the ops TF would copy to their consumers' devices when
  those span two hosts (every condition above but the placement's).

  Args:
    graph: the graph.
    step: bool [M], the ops a step runs (edges into other ops do not
      exist in the runtime graph, which is pruned to the step).
  """
  src, dst, out, _ = graph.edge_arrays
  inside = step[src] & step[dst]
  control = inside & (out < 0)
  data_out = np.bincount(src[inside & ~control], minlength=graph.num_ops)
  copied = np.zeros(graph.num_ops, bool)  # small, no control edge out
  for i, op in enumerate(graph.ops):
    if op.type in CONSTANT_TYPES and op.output_shapes:
      copied[i] = np.prod(op.output_shapes[0]) <= MAX_ELEMENTS
  copied[src[control]] = False
  return copied & (data_out >= 2)


def host_devices(device_names: Sequence[str],
                 device_types: Sequence[str]) -> np.ndarray:
  """int64 [D]: the device a copy of a constant read on each device would
  live on: a CPU itself; an accelerator its task's first CPU, or -1 - d
  where its task has no CPU in the cluster (a host of its own, and no
  CPU: nothing is replicated from or onto it).

  Args:
    device_names: full TF device strings, cluster order.
    device_types: their types ("CPU", "GPU", ...).
  """
  def task(name: str) -> str:
    return name.rsplit("/device:", 1)[0]

  first_cpu = {}
  for i, (name, kind) in enumerate(zip(device_names, device_types)):
    if kind == "CPU":
      first_cpu.setdefault(task(name), i)
  hosts = [i if kind == "CPU" else first_cpu.get(task(name), -1 - i)
           for i, (name, kind) in enumerate(zip(device_names, device_types))]
  return np.array(hosts, dtype=np.int64)
