"""Learned placers on tf-agents, laid out as tf-agents lays out an agent.

  features.py      what a network sees of a group (built from a GroupGraph)
  coarse.py        the units ColocRL places (coarse groups of colocation groups)
  environments/    the one-shot placement environment over the simulator:
                   action codecs, reward shaping, the evaluator (memory rule)
  networks/        the seq2seq placer, the hierarchical grouper + placer, the
                   value network, the masked output heads
  agents.py        REINFORCE (moving-average or value baseline) and PPO-clip
  imitation.py     the warm start: the policy fitted to the start placement
  experience.py    batches of one-step episodes as trajectories
  builders.py      environment + networks for each placer
  search.py        the search loop every learned placer shares
  search_loop.py   its working parts (agent, policy, train step, state)
  search_state.py  checkpoints, resume and the problem signature

Nothing here is imported by `import tfplace`: TensorFlow and tf-agents load
only when a learned placer runs (`tfplace.placers.colocrl`, `hierarchical`).
"""
