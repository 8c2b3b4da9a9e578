"""Placement environments: tf-agents `PyEnvironment`s over the simulator.

`placement_environment.PlacementEnvironment` is one-shot: one step places
every unit (a coarse group, or for the hierarchical planner a colocation group
and its group) and the reward comes from the simulated step time. `codecs`
turns actions into a device per colocation group, `rewards` shapes step times
into rewards, and `evaluator` simulates a batch of placements (with the memory
rule: repair or penalty). `progressive_environment.ProgressiveEnvironment` is
Placeto's MDP: an episode re-places one group per step, in topological order;
`schedule_evaluator` simulates its placements with each group's start time.
"""
