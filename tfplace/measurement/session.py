"""Running a (placed) training step in a TF1 Session, and the devices it used.

`run_training_step` runs the step in a `tf.compat.v1.Session` with
soft placement off (a device that cannot run an op is an error) and graph
rewrites off (grappler and the classic graph optimizer), so that the node
names in the step stats are the GraphDef's and every op runs where placed.
"""

import dataclasses
from typing import Dict, Optional

from absl import logging

from tfplace.cost.cluster import canonical_device
from tfplace.errors import ClusterError, MeasureError
from tfplace.graph.op_graph import OpGraph, StepFetches


@dataclasses.dataclass(frozen=True)
class StepRun:
  """The outcome of `run_training_step`.

  Attributes:
    loss: the loss value of the last step (None when no loss is known).
    devices_by_op: op name -> device it ran on (traced runs only).
    run_metadata: the RunMetadata of the last step (traced runs), or None.
  """
  loss: Optional[float]
  devices_by_op: Dict[str, str]
  run_metadata: object = None


def session_config(num_cpu_devices: int = 1):
  """A ConfigProto: n logical CPUs, no soft placement, no graph rewrites."""
  import tensorflow as tf
  config = tf.compat.v1.ConfigProto(
      device_count={"CPU": int(num_cpu_devices)},
      allow_soft_placement=False)
  config.graph_options.rewrite_options.disable_meta_optimizer = True
  config.graph_options.optimizer_options.opt_level = (
      tf.compat.v1.OptimizerOptions.L0)
  config.graph_options.optimizer_options.do_constant_folding = False
  config.graph_options.optimizer_options.do_common_subexpression_elimination = (
      False)
  return config


def run_training_step(graph_def, fetches: StepFetches, *,
                      num_cpu_devices: int = 1, target: str = "",
                      steps: int = 1, trace: bool = False) -> StepRun:
  """Runs the init ops once, then `steps` training steps.

  Args:
    graph_def: a (placed) GraphDef, or a MetaGraphDef.
    fetches: train ops, loss and init ops.
    num_cpu_devices: logical CPU devices the local session exposes.
    target: a session target (e.g. "grpc://host:port" of a
      `tf.distribute.Server`); "" for in-process.
    steps: training steps to run.
    trace: trace the last step (FULL_TRACE) to record devices used.

  Returns:
    A `StepRun`.

  Raises:
    MeasureError: TensorFlow could not place or run the graph.
  """
  import tensorflow as tf
  if hasattr(graph_def, "graph_def"):
    graph_def = graph_def.graph_def
  graph = tf.Graph()
  with graph.as_default():
    try:
      tf.compat.v1.import_graph_def(graph_def, name="")
    except (ValueError, TypeError, tf.errors.OpError) as e:
      raise MeasureError(f"cannot import the graph to run it: "
                         f"{_first_line(e)}") from None
  run_fetches = [fetches.loss] if fetches.loss else []
  targets = list(fetches.train_ops)
  loss, metadata = None, None
  try:
    with tf.compat.v1.Session(target, graph=graph,
                              config=session_config(num_cpu_devices)) as sess:
      if fetches.init_ops:
        sess.run(list(fetches.init_ops))
      for step in range(steps):
        kwargs = {}
        if trace and step == steps - 1:
          metadata = tf.compat.v1.RunMetadata()
          kwargs = dict(options=tf.compat.v1.RunOptions(
              trace_level=tf.compat.v1.RunOptions.FULL_TRACE),
                        run_metadata=metadata)
        values = sess.run(run_fetches + targets, **kwargs)
        loss = float(values[0]) if fetches.loss else None
  except (tf.errors.OpError, ValueError) as e:
    raise MeasureError(f"the training step failed: {_first_line(e)}") from None
  devices = devices_used(metadata) if metadata is not None else {}
  logging.info("ran %d step(s): loss %s, %d ops traced", steps, loss,
               len(devices))
  return StepRun(loss=loss, devices_by_op=devices, run_metadata=metadata)


def devices_used(run_metadata) -> Dict[str, str]:
  """Op name -> full device string, from a traced RunMetadata's step stats.

  Runtime-inserted nodes (_SOURCE, _SINK, _Send/_Recv, "x/ctrl/_12") are
  left out.
  """
  out: Dict[str, str] = {}
  for dev_stats in run_metadata.step_stats.dev_stats:
    try:
      device = canonical_device(dev_stats.device.split("/stream")[0]
                                .split("/memcpy")[0])
    except ClusterError:
      continue
    for node in dev_stats.node_stats:
      name = node.node_name.split(":")[0]
      if not name or name.rsplit("/", 1)[-1].startswith("_"):
        continue
      out[name] = device
  return out


def _first_line(e: Exception) -> str:
  """The informative line of a TF error (its last, before the "[[node]]")."""
  text = getattr(e, "message", None) or str(e)
  lines = [line.strip() for line in text.splitlines()
           if line.strip() and not line.strip().startswith("[[")]
  return lines[-1] if lines else type(e).__name__
