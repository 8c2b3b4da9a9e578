"""Real runs: timed steps, TF server clusters, batches, calibration, fidelity.

The top-level `tfplace.measure(graph, placement, ...)` is
`tfplace.measurement.runner.measure`.
"""
