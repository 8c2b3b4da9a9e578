"""What one message adds to a step, by what its two workers are doing.

A sender makes `count` scalars (or vectors of `message_bytes`), each read
by its own op on a receiver (the reads are summed there), in seven contexts:

* "idle": the scalars come from one seed: a stream between two workers
  that have nothing else to run;
* "sender_busy": the sender then runs a chain of `chain_ops` 128 x 128
  matmuls that reads every scalar, so the messages wait behind the chain
  and leave as a burst;
* "receiver_busy": the stream while the receiver runs such a chain from the
  step's start (the arrivals wait behind it);
* "both_busy": the stream while each worker runs its own chain;
* "scattered": the scalars are sums of the sender's chain's results, one
  every `chain_ops // count` matmuls: messages one at a time while the
  sender computes;
* "two_way": the idle stream, and as many scalars sent back at the same
  time (the cost is per pair of messages, one each way);
* "crossing": `CROSSING_CHAINS` chains of scalar adds, each op on the other
  worker than the op before it (a hash placement's pattern): `count`
  messages in all, both ways at once, each waited for by the next op.

Each context's step is timed with `few` and with `many` scalars, in
back-to-back pairs (`cluster_benchmark.BenchmarkRunner.median_difference`);
one message's cost is the median difference over (many - few). The chains
are in both steps, so they cancel. `predicted_message_costs` gives the
simulator's figure for the same graphs, so the two can be read side by
side (`scripts/message_cost.py`).

On this project's 2-worker local cluster (one core each, one run,
2026-11-29), a message adds 25 us to an idle stream, 30-36 us behind one
busy worker, 33 us scattered and 43 us with both workers busy, against a
ping-pong hop of 76 us; the simulator charges the idle stream's cost in
each of those contexts. Crossing: 37-44 us per message, simulated
0.76-0.89 of that (WORKSPACE_NOTES.md, issue 13).
"""

import dataclasses
from typing import Dict, List, Sequence

import numpy as np

from tfplace.cost.cluster import Cluster
from tfplace.cost.calibrated import Calibration
from tfplace.errors import MeasureError
from tfplace.measurement.config import MeasureConfig
from tfplace.measurement.send_delay import matmul_chain

CONTEXTS = ("idle", "sender_busy", "receiver_busy", "both_busy", "scattered",
            "two_way", "crossing")
# Chains of the "crossing" context (each crosses count / CROSSING_CHAINS
# times; an even number, so each chain ends on the worker it started on).
CROSSING_CHAINS = 4


@dataclasses.dataclass(frozen=True)
class MessageCostConfig:
  """Sizes of the graphs.

  Attributes:
    few: scalars sent in the smaller step.
    many: scalars sent in the larger one.
    chain_ops: 128 x 128 matmuls in each busy worker's chain (~45 us each
      on one core here), at least `many` (the scattered context takes one
      scalar every `chain_ops // count` of them).
    message_bytes: bytes of each message: a scalar (4), or a float32
      vector of message_bytes / 4 elements.
  """
  few: int = 8
  many: int = 40
  chain_ops: int = 200
  message_bytes: int = 4

  def __post_init__(self):
    if not 1 <= self.few < self.many <= self.chain_ops:
      raise MeasureError(
          f"message cost: needs 1 <= few < many <= chain_ops, got few="
          f"{self.few}, many={self.many}, chain_ops={self.chain_ops}")
    if self.message_bytes < 4 or self.message_bytes % 4:
      raise MeasureError(f"message cost: message_bytes must be a multiple "
                         f"of 4, got {self.message_bytes}")


def _check_contexts(contexts: Sequence[str]) -> None:
  if not contexts or set(contexts) - set(CONTEXTS):
    raise MeasureError(f"message cost: contexts must be among {CONTEXTS}, "
                       f"got {list(contexts)}")


def check_sizes(contexts: Sequence[str], sizes: MessageCostConfig) -> None:
  """Raises MeasureError for an unknown context, or for counts the crossing
  context cannot send (before any server is asked to run a step)."""
  _check_contexts(contexts)
  if "crossing" in contexts:
    for count in (sizes.few, sizes.many):
      _check_crossing_count(count)


def _check_crossing_count(count: int) -> None:
  if count % (2 * CROSSING_CHAINS):
    raise MeasureError(f"message cost: the crossing context sends a "
                       f"multiple of {2 * CROSSING_CHAINS} messages, got "
                       f"{count}; give such counts, or leave the crossing "
                       "context out")


def build_case(context: str, count: int, sender: str, receiver: str,
               chain_ops: int, message_bytes: int = 4) -> List:
  """Adds one context's step with `count` messages of `message_bytes` each
  to the default graph; returns its fetches (see the module docstring)."""
  import tensorflow as tf
  _check_contexts([context])
  # A scalar, or a vector that the sender fills from one.
  shape = [] if message_bytes == 4 else [message_bytes // 4]
  if context == "crossing":
    return [_crossing_chains(count, (sender, receiver), shape)]
  fetches = []
  with tf.device(sender):
    seed = tf.random.stateless_uniform([], seed=[1, 1])
    if context == "scattered":
      chain = matmul_chain(seed, chain_ops, 7)
      every = chain_ops // count
      scalars = [tf.reduce_sum(chain[(j + 1) * every - 1])
                 for j in range(count)]
      fetches.append(tf.reduce_sum(chain[-1]))
    else:
      scalars = [tf.add(seed, float(j)) for j in range(count)]
    if context == "sender_busy":
      fetches.append(tf.reduce_sum(
          matmul_chain(tf.add_n(scalars), chain_ops, 7)[-1]))
    if context == "both_busy":
      fetches.append(tf.reduce_sum(matmul_chain(seed, chain_ops, 7)[-1]))
    messages = scalars if not shape else [tf.fill(shape, s) for s in scalars]
  with tf.device(receiver):
    fetches.append(tf.add_n([tf.multiply(m, 2.0) for m in messages]))
    if context in ("receiver_busy", "both_busy"):
      start = tf.random.stateless_uniform([], seed=[3, 1])
      fetches.append(tf.reduce_sum(matmul_chain(start, chain_ops, 8)[-1]))
    if context == "two_way":
      back = tf.random.stateless_uniform([], seed=[2, 1])
      back = [tf.add(back, float(j)) for j in range(count)]
      back = back if not shape else [tf.fill(shape, b) for b in back]
  if context == "two_way":
    with tf.device(sender):
      fetches.append(tf.add_n([tf.multiply(b, 2.0) for b in back]))
  return fetches


def _crossing_chains(count: int, ends: Sequence[str], shape: List[int]):
  """The "crossing" context's step: its sum, on the sender."""
  import tensorflow as tf
  _check_crossing_count(count)
  sums = []
  for c in range(CROSSING_CHAINS):
    with tf.device(ends[c % 2]):
      x = tf.fill(shape, tf.random.stateless_uniform([], seed=[4, c]))
    for hop in range(count // CROSSING_CHAINS):
      with tf.device(ends[(c + hop + 1) % 2]):
        x = tf.add(x, 1.0, name=f"hop_{c}_{hop}")
    with tf.device(ends[c % 2]):  # Where the chain started.
      sums.append(tf.reduce_sum(x))
  with tf.device(ends[0]):
    return tf.add_n(sums)


def measure_message_costs(sender: str, receiver: str,
                          contexts: Sequence[str] = CONTEXTS,
                          sizes: MessageCostConfig = MessageCostConfig(),
                          config: MeasureConfig = MeasureConfig()
                          ) -> Dict[str, float]:
  """Seconds one message adds to a step, per context, on the servers
  behind `config.target` (`sender` and `receiver` are two of their
  devices).

  Raises:
    MeasureError: an unknown context, or a step failed.
  """
  import tensorflow as tf
  from tfplace.graph.op_graph import StepFetches
  from tfplace.measurement.cluster_benchmark import BenchmarkRunner
  from tfplace.measurement.session import StepSession
  check_sizes(contexts, sizes)
  graph, fetches = tf.Graph(), {}
  with graph.as_default():
    for context in contexts:
      for count in (sizes.few, sizes.many):
        with tf.name_scope(f"{context}_{count}"):
          fetches[context, count] = [t.name for t in build_case(
              context, count, sender, receiver, sizes.chain_ops,
              sizes.message_bytes)]
  out = {}
  with StepSession(graph.as_graph_def(), StepFetches(),
                   config=config) as session:
    runner = BenchmarkRunner(session, config, "the message-cost benchmark")
    for context in contexts:
      out[context] = runner.median_difference(
          fetches[context, sizes.many], fetches[context, sizes.few]) / (
              sizes.many - sizes.few)
  return out


def predicted_message_costs(cluster: Cluster, calibration: Calibration,
                            sender: str, receiver: str,
                            contexts: Sequence[str] = CONTEXTS,
                            sizes: MessageCostConfig = MessageCostConfig()
                            ) -> Dict[str, float]:
  """The simulator's seconds per message for the same graphs, per context.

  Args:
    cluster: the uncalibrated cluster holding `sender` and `receiver`.
    calibration: the calibration applied to it and to the op costs.
    sender, receiver: device names of `cluster`.
  """
  import tensorflow as tf
  from tfplace.graph.importers import from_tf_graph
  from tfplace.measurement.calibration_fit import calibrated_simulator
  check_sizes(contexts, sizes)
  index = cluster.device_index
  for name in (sender, receiver):
    if name not in index:
      raise MeasureError(f"message cost: {name} is not a device of cluster "
                         f"{cluster.name!r}")
  out = {}
  for context in contexts:
    steps = []
    for count in (sizes.few, sizes.many):
      graph = tf.Graph()
      with graph.as_default():
        fetches = build_case(context, count, sender, receiver,
                             sizes.chain_ops, sizes.message_bytes)
      op_graph = from_tf_graph(graph, [t.op.name for t in fetches], None,
                               name=f"{context}_{count}")
      ids = np.array([index[op.requested_device] for op in op_graph.ops],
                     np.int32)
      steps.append(calibrated_simulator(op_graph, cluster, calibration)
                   .simulate(ids).step_time_s)
    out[context] = (steps[1] - steps[0]) / (sizes.many - sizes.few)
  return out
