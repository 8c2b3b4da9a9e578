"""Real runs: timed steps, TF server clusters, batches, calibration.

The top-level `tfplace.measure(graph, placement, ...)` is
`tfplace.measurement.runner.measure`.
"""
