"""Learned placers on tf-agents, laid out as tf-agents lays out an agent.

  features.py     what a network sees of a group (built from a GroupGraph)
  coarse.py       the units ColocRL places (coarse groups of colocation groups)
  environments/   one-shot placement environments over the simulator
  networks/       the grouper and the attentional seq2seq placer (Networks)
  agents.py       REINFORCE (moving-average or value baseline) and PPO-clip
  search.py       the search loop every learned placer shares

Nothing here is imported by `import tfplace`: TensorFlow and tf-agents load
only when a learned placer runs.
"""
