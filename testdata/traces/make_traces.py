"""Regenerates the small real TensorFlow traces in testdata/traces/.

Run from the repository root: `python testdata/traces/make_traces.py [OUT_DIR]`
(default: testdata/traces). The graph is the same everywhere:
mm0 = a @ a on CPU:0, mm1 = mm0 @ mm0 and relu1 on CPU:1 (or worker task 1),
sum(relu1 + mm0) back on CPU:0, with a 64x64 float input, so each cross-device
tensor is 16384 bytes.
"""

import glob
import gzip
import json
import os
import shutil
import socket
import sys

import tfplace  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TF)
import tensorflow as tf

tf1 = tf.compat.v1


def _graph(dev0, dev1):
  g = tf.Graph()
  with g.as_default():
    with tf.device(dev0):
      a = tf1.random.normal([64, 64], seed=1, name="a")
      b = tf.matmul(a, a, name="mm0")
    with tf.device(dev1):
      d = tf.nn.relu(tf.matmul(b, b, name="mm1"), name="relu1")
    with tf.device(dev0):
      e = tf.reduce_sum(d + b, name="sum")
  return g, e


def _traced_run(target, g, fetch, config=None):
  with tf1.Session(target, graph=g, config=config) as sess:
    sess.run(fetch)  # warm up
    md = tf1.RunMetadata()
    sess.run(fetch, options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE),
             run_metadata=md)
  return md


def local_step_stats(out):
  """Two logical CPUs in one Session: step_stats_2cpu.pbtxt (text StepStats)."""
  g, e = _graph("/cpu:0", "/cpu:1")
  md = _traced_run("", g, e, tf1.ConfigProto(device_count={"CPU": 2}))
  with open(os.path.join(out, "step_stats_2cpu.pbtxt"), "w") as f:
    f.write(str(md.step_stats))


def _port():
  s = socket.socket()
  s.bind(("localhost", 0))
  port = s.getsockname()[1]
  s.close()
  return port


def two_worker_run_metadata(out):
  """Two local TF servers: run_metadata_2workers.pb (binary RunMetadata, with
  RecvTensor transfers) and timeline_2workers.json (TF1 Timeline Chrome JSON)."""
  from tensorflow.python.client import timeline
  spec = tf.train.ClusterSpec({"worker": [f"localhost:{_port()}" for _ in range(2)]})
  servers = [tf.distribute.Server(spec, job_name="worker", task_index=i)
             for i in range(2)]
  g, e = _graph("/job:worker/task:0/cpu:0", "/job:worker/task:1/cpu:0")
  md = _traced_run(servers[0].target, g, e)
  with open(os.path.join(out, "run_metadata_2workers.pb"), "wb") as f:
    f.write(md.SerializeToString())
  with open(os.path.join(out, "timeline_2workers.json"), "w") as f:
    f.write(timeline.Timeline(md.step_stats).generate_chrome_trace_format())


def profiler_xplane(out):
  """tf.profiler.experimental around a tf.function on 2 logical CPUs:
  profile_2cpu/plugins/profile/<run>/host.xplane.pb, and the same converted
  to Chrome JSON by TF's trace-viewer converter: xplane_2cpu.json.gz."""
  from tensorflow.python.profiler.internal import _pywrap_profiler_plugin

  @tf.function
  def step(a):
    with tf.device("/cpu:0"):
      b = tf.matmul(a, a, name="mm0")
    with tf.device("/cpu:1"):
      d = tf.nn.relu(tf.matmul(b, b, name="mm1"), name="relu1")
    with tf.device("/cpu:0"):
      return tf.reduce_sum(d + b, name="sum")

  a = tf.random.normal([64, 64], seed=1)
  step(a)
  logdir = os.path.join(out, "_profile_tmp")
  tf.profiler.experimental.start(logdir)
  step(a)
  tf.profiler.experimental.stop()
  src = glob.glob(os.path.join(logdir, "plugins/profile/*/*.xplane.pb"))[0]
  run = os.path.basename(os.path.dirname(src))
  dst_dir = os.path.join(out, "profile_2cpu", "plugins", "profile", run)
  os.makedirs(dst_dir, exist_ok=True)
  shutil.copy(src, os.path.join(dst_dir, "host.xplane.pb"))
  data, ok = _pywrap_profiler_plugin.xspace_to_tools_data([src], "trace_viewer@", {})
  assert ok, "xplane conversion failed"
  json.loads(data)
  with open(os.path.join(out, "xplane_2cpu.json.gz"), "wb") as f:
    f.write(gzip.compress(data, mtime=0))
  shutil.rmtree(logdir)


def two_worker_profile(out):
  """`tfplace.measure` on a LocalCluster of two TF server processes with a
  trace_dir: profile_2workers/plugins/profile/<run>/<host>_<port>.xplane.pb,
  one per worker, and tasks.json naming each file's task (the step_stats.pb
  that measure also writes is left out)."""
  from tfplace.graph.importers import from_tf_graph
  from tfplace.measurement.local_cluster import LocalCluster, worker_device
  from tfplace.measurement.runner import measure
  from tfplace.placement import Placement
  g, e = _graph("/job:worker/task:0/cpu:0", "/job:worker/task:1/cpu:0")
  graph = from_tf_graph(g, [e.op.name], None, [], name="two_workers")
  placement = Placement({op.name: worker_device(int(op.name.startswith(
      ("mm1", "relu1")))) for op in graph.ops})
  trace_dir = os.path.join(out, "_measure_tmp")
  with LocalCluster(num_workers=2) as servers:
    timing = measure(graph, placement, target=servers.target, steps=3,
                     trace_dir=trace_dir)
  assert timing.profile_error is None, timing.profile_error
  run = glob.glob(os.path.join(trace_dir, "plugins/profile/*"))[0]
  dst = os.path.join(out, "profile_2workers", "plugins", "profile",
                     os.path.basename(run))
  shutil.copytree(run, dst)
  shutil.rmtree(trace_dir)


def main():
  out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
  tf.config.set_logical_device_configuration(
      tf.config.list_physical_devices("CPU")[0],
      [tf.config.LogicalDeviceConfiguration()] * 2)
  local_step_stats(out)
  two_worker_run_metadata(out)
  profiler_xplane(out)
  two_worker_profile(out)


if __name__ == "__main__":
  main()
