"""TF2 step time of independent towers split over two TF servers vs on one.

Starts a 2-worker local TF server cluster (one core each), connects eager TF
to it (`tfplace.apply.connect`), imports the step Keras `fit` runs for a model
of independent MLP towers (`tfplace.apply.import_fit_step`), and applies two
placements with `tfplace.apply`: "split" (tower t on worker t mod 2, the
rest on worker 0, each colocation group on its members' majority device) and
"one" (everything on worker 0). It then times the placed train function —
the step `fit` runs — for each, in alternating rounds, and prints the median
step times and their ratio (--json: the last line is a JSON object). The
devices TF used for the split are checked against the placement.
"""

import collections
import json
import re
import statistics
import time

from absl import app
from absl import flags

import tfplace  # noqa: F401  (before TensorFlow)

_TOWERS = flags.DEFINE_integer("towers", 2, "independent towers")
_HIDDEN = flags.DEFINE_integer("hidden", 1024, "units per dense layer")
_LAYERS = flags.DEFINE_integer("layers", 4, "dense layers per tower")
_BATCH = flags.DEFINE_integer("batch", 256, "batch size")
_STEPS = flags.DEFINE_integer("steps", 5, "timed steps per round")
_ROUNDS = flags.DEFINE_integer("rounds", 5, "alternating rounds")
_JSON = flags.DEFINE_bool("json", False, "end with a JSON line")


def towers_model():
  import tensorflow as tf
  inputs = tf.keras.Input((_HIDDEN.value,), name="x")
  outs = []
  for t in range(_TOWERS.value):
    h = inputs
    for k in range(_LAYERS.value):
      h = tf.keras.layers.Dense(_HIDDEN.value, activation="relu",
                                name=f"tower{t}_dense{k}")(h)
    outs.append(tf.keras.layers.Dense(1, name=f"tower{t}_out")(h))
  model = tf.keras.Model(inputs, tf.keras.layers.Add(name="sum")(outs),
                         name="towers")
  model.compile(optimizer=tf.keras.optimizers.SGD(0.01), loss="mse")
  return model


def split_placement(graph, devices):
  """Tower t on devices[t % n], the rest on devices[0]; groups kept whole."""
  from tfplace.placement import Placement
  tower = re.compile(r"tower(\d+)_")
  votes = collections.defaultdict(collections.Counter)
  for i, op in enumerate(graph.ops):
    m = tower.search(op.name)
    device = devices[int(m.group(1)) % len(devices)] if m else devices[0]
    votes[int(graph.group_of[i])][device] += 1 if m else 0.1
  group_device = {g: c.most_common(1)[0][0] for g, c in votes.items()}
  return Placement({op.name: group_device[int(graph.group_of[i])]
                    for i, op in enumerate(graph.ops)})


def time_steps(train_function, iterator, steps: int) -> float:
  """Median seconds of `steps` placed train steps (loss fetched each)."""
  times = []
  for _ in range(steps):
    start = time.perf_counter()
    float(train_function(iterator)["loss"])
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def main(argv):
  del argv
  import numpy as np
  import tensorflow as tf
  from tfplace.measurement.local_cluster import LocalCluster
  rng = np.random.RandomState(0)
  x = rng.randn(_BATCH.value, _HIDDEN.value).astype(np.float32)
  y = rng.randn(_BATCH.value, 1).astype(np.float32)
  model = towers_model()
  graph = tfplace.apply.import_fit_step(model, x, y)
  with LocalCluster(num_workers=2) as servers:
    devices = tfplace.apply.connect(servers)
    placements = {"split": split_placement(graph, devices),
                  "one": split_placement(graph, devices[:1])}
    placed, iterators = {}, {}
    for name, placement in placements.items():
      placement.validate(graph)
      placed[name] = tfplace.apply(model, placement, args=(x, y))
      iterators[name] = iter(tf.data.Dataset.from_tensors((x, y)).repeat())
    with tfplace.apply.record_devices() as used:
      time_steps(placed["split"].train_function, iterators["split"], 2)
    report = placed["split"].train_function.report
    match = used.compare(placements["split"], prefix=report.call_prefix)
    time_steps(placed["one"].train_function, iterators["one"], 2)
    rounds = {name: [] for name in placed}
    for _ in range(_ROUNDS.value):
      for name in placed:
        rounds[name].append(time_steps(placed[name].train_function,
                                       iterators[name], _STEPS.value))
  result = {name: statistics.median(v) for name, v in rounds.items()}
  result.update(
      speedup=result["one"] / result["split"],
      split_ops_on_placed_device=match.fraction,
      split_ops_compared=match.compared,
      ops=graph.num_ops, towers=_TOWERS.value, hidden=_HIDDEN.value,
      layers=_LAYERS.value, batch=_BATCH.value)
  print(f"split over 2 workers: {result['split'] * 1e3:.1f} ms/step, "
        f"all on one worker: {result['one'] * 1e3:.1f} ms/step, speedup "
        f"{result['speedup']:.2f}x ({100 * match.fraction:.1f} % of "
        f"{match.compared} placed ops ran on their device)")
  if _JSON.value:
    print(json.dumps(result))


if __name__ == "__main__":
  app.run(main)
