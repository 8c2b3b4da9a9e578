"""TF2 step time of independent towers split over two TF servers vs on one.

Starts a 2-worker local TF server cluster (one core each), connects eager TF
to it (`tfplace.apply.connect`) and, for a Keras model of independent MLP
towers, places two TF2 steps with `tfplace.apply`: the step Keras `fit` runs
(`import_fit_step`; its train function is timed) and a custom tf.function
step that applies each gradient directly (`skip_gradients_aggregation=True`).
Each gets two placements: "split" (tower t on worker t mod 2, other ops with
their inputs) and "one" (everything on worker 0). The steps are timed in
alternating rounds; it prints the median step times and their ratio per step
kind (--json: the last line is a JSON object), and checks the devices TF used
for each split against the placement.

Keras `fit` aggregates gradients with the default strategy's all-reduce, one
IdentityN op over every gradient: whatever device it gets, the other tower's
gradients cross to it and back, which the custom step avoids.
"""

import collections
import json
import re
import statistics
import sys
import time

import tfplace  # noqa: F401  (before TensorFlow)
from tfplace.cli.app_runner import run_app, start_script

start_script("tf2_towers")  # Ctrl-C, TF's start-up lines: from here.

from absl import flags


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
  """Tower t on devices[t % n] with its colocation groups; other ops go
  where most of their input bytes are (in topological order; devices[0]
  without inputs), so that a tower's gradients and updates stay with it."""
  from tfplace.placement import Placement
  tower = re.compile(r"tower(\d+)_")
  towers = collections.defaultdict(collections.Counter)
  for i, op in enumerate(graph.ops):
    m = tower.search(op.name)
    if m:
      towers[int(graph.group_of[i])][int(m.group(1)) % len(devices)] += 1
  inputs = collections.defaultdict(list)
  for e in graph.edges:
    inputs[e.dst].append((e.src, e.bytes + 1))
  device, votes = {}, collections.defaultdict(collections.Counter)
  for i in graph.topo_order:
    group = int(graph.group_of[i])
    if towers[group]:
      device[i] = devices[towers[group].most_common(1)[0][0]]
    else:
      weights = collections.Counter()
      for src, nbytes in inputs[i]:
        weights[device.get(src, devices[0])] += nbytes
      device[i] = weights.most_common(1)[0][0] if weights else devices[0]
    votes[group][device[i]] += 1
  return Placement({op.name: votes[int(graph.group_of[i])].most_common(1)[0][0]
                    for i, op in enumerate(graph.ops)})


def custom_step_factory(model_fn):
  """A builder of a custom tf.function step (Keras model, SGD) that applies
  each gradient to its variable directly (`skip_gradients_aggregation`: no
  all-reduce IdentityN that gathers every gradient on one device)."""
  import tensorflow as tf

  def make():
    model = model_fn()
    optimizer, loss_fn = model.optimizer, tf.keras.losses.MeanSquaredError()

    @tf.function
    def step(x, y):
      with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
      grads = tape.gradient(loss, model.trainable_variables)
      optimizer.apply_gradients(zip(grads, model.trainable_variables),
                                skip_gradients_aggregation=True)
      return loss
    return step, model
  return make


def time_steps(step, steps: int) -> float:
  """Median seconds of `steps` calls of `step()` (loss fetched each)."""
  times = []
  for _ in range(steps):
    start = time.perf_counter()
    step()
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def placed_steps(model, x, y, devices):
  """{(kind, placement): (step callable, placement, graph)}: Keras fit's
  train function and the custom step, each split and on one worker."""
  import tensorflow as tf
  make = custom_step_factory(towers_model)
  fit_graph = tfplace.apply.import_fit_step(model, x, y)
  step, _ = make()
  custom_graph = tfplace.apply.import_step(step, args=(x, y),
                                           optimizers=[model.optimizer])
  out = {}
  for where, devs in (("split", devices), ("one", devices[:1])):
    placement = split_placement(fit_graph, devs)
    placement.validate(fit_graph)
    fn = tfplace.apply(model, placement, args=(x, y)).train_function
    it = iter(tf.data.Dataset.from_tensors((x, y)).repeat())
    out[("fit", where)] = (lambda fn=fn, it=it: float(fn(it)["loss"]),
                           placement, fn)
    placement = split_placement(custom_graph, devs)
    placement.validate(custom_graph)
    fn = tfplace.apply(make, placement, factory=True, args=(x, y))
    xt, yt = tf.constant(x), tf.constant(y)
    out[("custom", where)] = (lambda fn=fn: float(fn(xt, yt)), placement, fn)
  return out


def main(argv):
  del argv
  import numpy as np
  from tfplace.measurement.local_cluster import LocalCluster
  rng = np.random.RandomState(0)
  x = rng.randn(_BATCH.value, _HIDDEN.value).astype(np.float32)
  y = rng.randn(_BATCH.value, 1).astype(np.float32)
  model = towers_model()
  with LocalCluster(num_workers=2) as servers:
    devices = tfplace.apply.connect(servers)
    steps = placed_steps(model, x, y, devices)
    matches = {}
    for key, (run, placement, fn) in steps.items():
      with tfplace.apply.record_devices() as used:
        run()
      report = fn.report
      matches[key] = used.compare(placement, prefix=report.call_prefix)
      run()
    rounds = {key: [] for key in steps}
    for _ in range(_ROUNDS.value):
      for key, (run, _, _) in steps.items():
        rounds[key].append(time_steps(run, _STEPS.value))
  result = {"towers": _TOWERS.value, "hidden": _HIDDEN.value,
            "layers": _LAYERS.value, "batch": _BATCH.value}
  for kind in ("fit", "custom"):
    split = statistics.median(rounds[(kind, "split")])
    one = statistics.median(rounds[(kind, "one")])
    match = matches[(kind, "split")]
    result[kind] = {"split_s": split, "one_s": one, "speedup": one / split,
                    "split_ops_on_placed_device": match.fraction,
                    "split_ops_compared": match.compared}
    print(f"{kind}: split over 2 workers {split * 1e3:.1f} ms/step, all on "
          f"one worker {one * 1e3:.1f} ms/step, speedup {one / split:.2f}x "
          f"({100 * match.fraction:.1f} % of {match.compared} placed ops ran "
          "on their device)")
  if _JSON.value:
    print(json.dumps(result))


if __name__ == "__main__":
  run_app(main, sys.argv, "tf2_towers")
