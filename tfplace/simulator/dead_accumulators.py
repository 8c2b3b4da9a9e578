"""Loop accumulators a TF2 step builds and TensorFlow never runs.

A TF2 `while_v2` loop (a Keras RNN's, `tf.while_loop` in a `tf.function`)
that is differentiated gets one TensorList accumulator per intermediate
the gradient might need: an `EmptyTensorList` (with a Const shape and
size) enters the loop as a loop variable, the body pushes onto it, and the
loop returns it. The gradient reads only some of them. TF's runtime lowers
the `While` op into Enter/Merge/Switch/Exit nodes and prunes what no fetch
reaches: an accumulator whose loop output nothing reads, with its
`EmptyTensorList` and constants, never runs and sends nothing.

Measured (2026-11-29, a Keras LSTM's partition graphs on two TF server
workers, `RunOptions.output_partition_graphs`): of the forward loop's 44
loop variables the step reads 19 outputs; the 22 `EmptyTensorList`s among
the other 25 were not in the partition graphs, and the split placements
sent 6-88 tensors where one message per remote consumer device of every
tensor counts 10-113.

`dead_ops` finds them; the simulator sends nothing from or to them (they
stay in the step, as predecessors of their loop).
"""

import numpy as np

from tfplace.graph.function_bodies import WHILE_OPS
from tfplace.graph.op_graph import OpGraph

ACCUMULATOR_TYPES = frozenset({"EmptyTensorList"})


def dead_ops(graph: OpGraph, step: np.ndarray) -> np.ndarray:
  """bool [M]: the ops of the step TF prunes: accumulators entering a
  functional While whose matching output the step never reads, and every
  op whose consumers in the step are all pruned (none without the graph's
  GraphDef, which holds each While's input order).

  Args:
    graph: the graph.
    step: bool [M], the ops a step runs.
  """
  dead = np.zeros(graph.num_ops, bool)
  if graph.graph_def is None:
    return dead
  whiles = {graph.index[n.name]: n for n in graph.graph_def.node
            if n.op in WHILE_OPS and n.name in graph.index}
  if not whiles:
    return dead
  src, dst, out, _ = graph.edge_arrays
  inside = step[src] & step[dst]
  dead_edges = set()
  for w, node in whiles.items():
    if not step[w]:
      continue
    read = set(out[inside & (src == w) & (out >= 0)].tolist())
    inputs = [x for x in node.input if not x.startswith("^")]
    for k, tensor in enumerate(inputs):
      p = graph.index.get(tensor.split(":")[0])
      if (p is not None and k not in read
          and graph.ops[p].type in ACCUMULATOR_TYPES):
        dead_edges.add((p, w))
  if not dead_edges:
    return dead
  fetched = np.zeros(graph.num_ops, bool)
  for name in graph.fetches.step_roots:
    i = graph.index.get(name.lstrip("^").split(":")[0])
    if i is not None:
      fetched[i] = True
  consumers = {}  # op -> the ops it feeds in the step
  for p, d in zip(src[inside].tolist(), dst[inside].tolist()):
    if not fetched[p]:
      consumers.setdefault(p, []).append(d)
  changed = True
  while changed:  # Backwards from the dead edges, a few rounds.
    changed = False
    for p, fed in consumers.items():
      if not dead[p] and all(dead[d] or (p, d) in dead_edges for d in fed):
        dead[p] = changed = True
  return dead
