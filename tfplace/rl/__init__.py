"""Learned placers on tf-agents, laid out as tf-agents lays out an agent.

  features.py      what a network sees of a group (built from a GroupGraph)
  progressive_graph.py  what Placeto's graph network sees of the group graph
  environments/    the one-shot placement environment over the simulator:
                   action codecs, reward shaping, the evaluator (memory rule);
                   Placeto's progressive environment and schedule evaluator
  networks/        the seq2seq placer, the hierarchical grouper + placer, the
                   value network, the masked output heads; Placeto's graph
                   embedding, inputs, policy and value networks
  agents.py        REINFORCE (moving-average, value or per-step baseline) and
                   PPO-clip
  imitation.py     the warm start: the policy fitted to the start placement
  experience.py    batches of one-step episodes as trajectories
  builders.py      environment + networks for each placer
  search.py        the search loop every learned placer shares
  search_loop.py   its working parts (agent, policy, train step, state)
  search_state.py  checkpoints, resume and the problem signature
  progressive_search.py  the search loop's step on Placeto's episodes
  placeto_builder.py     environment + networks for Placeto
  batch_training.py      GDP's batch training: one policy, several graphs
  transfer.py      GDP's network weights saved and loaded across graphs
  contrastive.py   Mars's Deep Graph Infomax pre-training
  update_guard.py  a train step that leaves a weight non-finite is undone

The units ColocRL, Placeto, GDP and Mars place are `tfplace.grouping.chunks`.

Nothing here is imported by `import tfplace`: TensorFlow and tf-agents load
only when a learned placer runs (`tfplace.placers.colocrl`, `hierarchical`,
`placeto`).
"""
