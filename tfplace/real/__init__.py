"""Learning from real runs: the simulator proposes, the target decides.

Modules:

* `target`: where steps run (TF servers or this process) and the checks
  made before any work (reachable, the cluster's devices, the calibration).
* `interleaved`: several placements measured in interleaved rounds, their
  times relative to a reference in the same round (drift cancels).
* `candidates`: a placer's K best distinct placements and the best
  heuristic.
* `rank_report`: predicted vs measured per candidate, the simulator's rank
  error, the speed-up over the best heuristic.
* `verify`: `verify_top_k` (`tfplace place --verify_top_k K --target T`).
* `measured_evaluator`: measured step times as a search's evaluator
  (batched, cached, relative to a reference run around each batch,
  failures a penalty).
* `fine_tune`: a search on measured times from the simulator's result
  (`--real_reward`).
* `learned_fine_tune`: a learned placer's simulator-trained policy resumed
  on measured times (a copy of its checkpoint).
* `api`: `place_on_target`: search, verify, fine-tune in one call.
"""
