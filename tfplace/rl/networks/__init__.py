"""Networks of the learned placers; each is a `tf_agents.networks.Network`.

`seq2seq_placer.Seq2SeqPlacerNetwork` (ColocRL's attentional LSTM placer),
`hierarchical_network.HierarchicalNetwork` (the hierarchical planner's grouper
and placer, trained jointly), `value_network.GraphValueNetwork` (the value
baseline), `heads` (masked categorical output heads), and Placeto's
`placeto_network.PlacetoNetwork` / `PlacetoValueNetwork` over
`graph_embedding` (message passing, pooled summaries) and `placeto_inputs`.
"""
