"""Op-type samples from the nodes a traced step's While loops ran.

A session lowers each While to a loop frame and runs its body's ops once
per iteration, under names no graph op has (`tfplace.graph.lowered_loops`);
`StepTiming.loop_records` keeps them, summed per node. Each node whose row
of the While's `ControlFlowCost` is known gives one sample: its mean
duration less the tracer's cost per op, against the row's roofline. The
frame's own ops (Merge, Switch, NextIteration, Enter, Exit, LoopCond) and
the TensorList ops of a loop's arrays and accumulators run in no other
graph. The body's other ops run there many times at small sizes: fitted
as top-level ops, the suite's two GRU loops were predicted 1.07-1.35x
their one-worker steps, and 0.97-1.05x with fits of their own
(WORKSPACE_NOTES.md, issue 13). So `calibration_fit.fit_op_types` uses
these samples only for the op types the graphs' top-level ops do not
sample (`OpSample.in_loop`), and `Calibration.loop_op_types`, which body
rows take first, is fitted on them alone (`calibration_runs`).
"""

from typing import Collection, List, Mapping

import numpy as np

from tfplace.cost.analytical import AnalyticalCostModel
from tfplace.cost.cluster import Cluster
from tfplace.graph.lowered_loops import body_row
from tfplace.graph.op_graph import OpGraph
from tfplace.measurement.calibration_fit import OpSample
from tfplace.measurement.timing import StepTiming

# Prefixes of a CPU kernel's name that the type it runs lacks
# ("_MklMatMul" runs a MatMul).
_KERNEL_PREFIXES = ("MklNative", "Mkl")


def traced_type(kernel: str) -> str:
  """The op type a traced kernel name runs ("_MklMatMul" -> "MatMul")."""
  name = kernel.lstrip("_")
  for prefix in _KERNEL_PREFIXES:
    if name.startswith(prefix):
      return name[len(prefix):]
  return name


def loop_samples(graph: OpGraph, cluster: Cluster, timing: StepTiming,
                 traced_op_s: Mapping[str, float],
                 kernel_devices: Collection[str] = ()) -> List[OpSample]:
  """One sample per traced loop node of `timing` that maps to a body row
  of its While and ran the row's op type (a fused kernel, such as a
  matmul with its bias and activation run under the activation's name,
  gives none), on a device of `cluster` that is not launch-bound
  (`kernel_devices`: a loop's kernels are not told apart there)."""
  loops = {op.name: op.body for op in graph.ops if op.body is not None}
  model = AnalyticalCostModel()
  work = {}
  out = []
  for rec in timing.loop_records:
    j = cluster.device_index.get(rec.device)
    body = loops.get(rec.loop)
    if (j is None or body is None or rec.executions <= 0
        or cluster.devices[j].name in kernel_devices):
      continue
    row = body_row(rec.name, rec.op_type, body)
    if row is None or row.type != traced_type(rec.op_type):
      continue
    if rec.loop not in work:
      work[rec.loop] = dict(zip(body.ops,
                                model.body_work_seconds(body, cluster)))
    row_work = work[rec.loop][row][j]
    measured = (rec.total_s / rec.executions
                - traced_op_s.get(cluster.devices[j].name, 0.0))
    if np.isfinite(row_work):
      out.append(OpSample(row.type, cluster.devices[j].type, float(row_work),
                          max(0.0, measured), in_loop=True))
  return out
