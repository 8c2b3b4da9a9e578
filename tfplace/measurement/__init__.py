"""Real runs: timed steps, TF server clusters, batches, calibration.

The top-level `tfplace.measure(graph, placement, config, ...)` is
`tfplace.measurement.runner.measure`. Modules:

* `config`: `MeasureConfig`, the one set of settings of every real run
  (target, warmup and timed steps, deadlines, health checks).
* `session`: the one step runner (`StepSession`: a TF1 Session on a placed
  graph; init, then untimed, timed or traced steps) and `run_training_step`.
* `runner`: `measure`: one placement's timed, traced and profiled steps,
  watched for dead workers (`health`).
* `timing`: what a measurement gives (`StepTiming`, `OpRecord`).
* `graph_inputs`, `feeds`: placeholders, input pipelines, and the user's or
  synthetic values fed to them.
* `health`: is every worker of a server cluster alive?
* `local_cluster`, `worker_main`, `remote_profile`: TF server processes on
  this machine (or elsewhere) and their profiler traces.
* `batch`: many placements, cached, failure-tolerant.
* `comm_benchmark`, `calibration`, `calibration_runs`: link fits and the
  simulator's calibration from real runs.
"""
