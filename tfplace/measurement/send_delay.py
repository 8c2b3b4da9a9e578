"""How long a message waits behind a busy worker.

A scalar `producer` on the sender feeds a `consumer` on the receiver. In
the "sender" case the sender also runs a chain of `busy_ops` ops that starts
right after the producer; in the "receiver" case the receiver runs the chain
from the start of the step. The "waiting_sender" case is the "sender" case
with the sender idle first: its producer also reads a scalar `go` that the
receiver computes from the sender's seed with a chain of `WAIT_OPS` adds,
so the sender has nothing to run for a while before the producer (TF's
worker takes the receiver's request for the producer's tensor, a task on
its one-thread pool queued behind the ops it can run, in that idle time).
From the traced step (FULL_TRACE op records): the delay is the consumer's
start less the producer's end, and the busy time is how long the busy
worker ran its chain after the producer ended (the sender cases) or after
the step started (receiver).

On this project's one-core TF server workers a message moves only when its
sender, then its receiver, has nothing left to run: behind 6.4 ms of scalar
adds a scalar arrives 6.9 ms after its producer ended, 0.3 ms from an idle
sender, and the same behind a waiting sender (WORKSPACE_NOTES.md, issue
13). The simulator's rendezvous clusters follow that rule
(`tfplace.simulator.simulator`).
"""

import dataclasses
from typing import List, Optional, Sequence

import numpy as np

from tfplace.errors import MeasureError
from tfplace.measurement.config import MeasureConfig
from tfplace.measurement.session import session_config
from tfplace.measurement.timing import op_records

# The chain's ops: a scalar add, or a 128 x 128 matmul (~45 us on a core).
CHAIN_KINDS = ("add", "matmul")
BUSY_SIDES = ("sender", "receiver", "waiting_sender")
# The "waiting_sender" case: adds on the receiver before it sends `go`.
WAIT_OPS = 200


@dataclasses.dataclass(frozen=True)
class SendDelay:
  """One case, medians over the traced steps.

  Attributes:
    busy_side: "sender", "receiver" or "waiting_sender".
    kind: the chain's op ("add" or "matmul").
    busy_ops: ops in the chain (0: both workers idle but for the message).
    busy_s: how long the chain ran after the producer ended (sender) or
      after the step started (receiver).
    delay_s: the consumer's start less the producer's end.
    delay_p10_s: the 10th percentile of the delay.
    delay_p90_s: its 90th percentile.
    steps: traced steps.
  """
  busy_side: str
  kind: str
  busy_ops: int
  busy_s: float
  delay_s: float
  delay_p10_s: float
  delay_p90_s: float
  steps: int


def matmul_chain(start, count: int, seed: int = 7,
                 prefix: Optional[str] = None) -> List:
  """The outputs of `count` (>= 1) chained 128 x 128 matmuls from the
  scalar `start` (named prefix0, prefix1, ... when a prefix is given)."""
  import tensorflow as tf
  w = tf.random.stateless_uniform([128, 128], seed=[seed, 1]) * 0.01
  x = tf.random.stateless_uniform([128, 128], seed=[seed, 2]) + start
  out = []
  for i in range(count):
    x = tf.matmul(x, w, name=f"{prefix}{i}" if prefix else None)
    out.append(x)
  return out


def _chain(x, kind: str, count: int, prefix: str):
  import tensorflow as tf
  if kind == "matmul":
    x = matmul_chain(x, count, prefix=prefix)[-1]
  else:
    for i in range(count):
      x = tf.add(x, 1e-3, name=f"{prefix}{i}")
  return tf.reduce_sum(x)


def _graph(sender: str, receiver: str, busy_side: str, kind: str,
           busy_ops: int):
  """The graph and its fetches (see the module docstring)."""
  import tensorflow as tf
  graph = tf.Graph()
  with graph.as_default():
    with tf.device(sender):
      seed = tf.random.stateless_uniform([], seed=[1, 1], name="seed")
    if busy_side == "waiting_sender":
      with tf.device(receiver):
        go = tf.identity(_chain(seed, "add", WAIT_OPS, "wait_"), name="go")
      with tf.device(sender):
        seed = tf.add(seed, go, name="seed_and_go")
    with tf.device(sender):
      producer = tf.add(seed, 1.0, name="producer")
    with tf.device(receiver):
      consumer = tf.add(producer, 1.0, name="consumer")
    fetches = [consumer]
    if busy_ops:
      on_receiver = busy_side == "receiver"
      with tf.device(receiver if on_receiver else sender):
        start = producer if not on_receiver else (
            tf.random.stateless_uniform([], seed=[2, 1], name="busy_seed"))
        fetches.append(_chain(start, kind, busy_ops, "busy_"))
  return graph, fetches


def measure_send_delay(sender: str, receiver: str, busy_side: str = "sender",
                       kind: str = "add", busy_ops: int = 0,
                       config: MeasureConfig = MeasureConfig()
                       ) -> SendDelay:
  """Measures one case on the cluster of `config.target` (`config.warmup`
  untraced steps, then `config.steps` traced ones).

  Raises:
    MeasureError: an unknown side or kind, fewer than one step, or a traced
      step without the producer's or the consumer's record.
  """
  import tensorflow as tf
  if busy_side not in BUSY_SIDES or kind not in CHAIN_KINDS:
    raise MeasureError(f"send delay: busy_side must be one of {BUSY_SIDES} "
                       f"and kind one of {CHAIN_KINDS}, got {busy_side!r}, "
                       f"{kind!r}")
  if config.steps < 1 or busy_ops < 0:
    raise MeasureError("send delay: needs at least one step and busy_ops >= "
                       "0")
  graph, fetches = _graph(sender, receiver, busy_side, kind, busy_ops)
  options = tf.compat.v1.RunOptions(
      trace_level=tf.compat.v1.RunOptions.FULL_TRACE,
      timeout_in_ms=int(config.step_timeout_s * 1000))
  delays: List[float] = []
  busy: List[float] = []
  with tf.compat.v1.Session(config.target, graph=graph, config=session_config(
      1, remote=config.remote, timeout_s=config.step_timeout_s)) as sess:
    for _ in range(config.warmup):
      sess.run(fetches)
    for _ in range(config.steps):
      metadata = tf.compat.v1.RunMetadata()
      sess.run(fetches, options=options, run_metadata=metadata)
      delay, ran = _delay_and_busy(op_records(metadata.step_stats),
                                   busy_side)
      delays.append(delay)
      busy.append(ran)
  return SendDelay(busy_side, kind, busy_ops, float(np.median(busy)),
                   float(np.median(delays)),
                   float(np.percentile(delays, 10)),
                   float(np.percentile(delays, 90)), len(delays))


def _delay_and_busy(records: Sequence, busy_side: str):
  """(consumer start - producer end, the chain's busy time) of one step."""
  by_name = {r.name: r for r in records}
  if "producer" not in by_name or "consumer" not in by_name:
    raise MeasureError("send delay: the traced step has no record of the "
                       "producer or the consumer")
  produced = by_name["producer"].start_s + by_name["producer"].duration_s
  chain = [r for r in records if r.name.startswith("busy_")]
  ran = 0.0
  if chain:
    since = 0.0 if busy_side == "receiver" else produced
    ran = max(r.start_s + r.duration_s for r in chain) - since
  return by_name["consumer"].start_s - produced, max(0.0, ran)
