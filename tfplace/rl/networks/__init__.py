"""Networks of the learned placers; each is a `tf_agents.networks.Network`.

`seq2seq_placer.Seq2SeqPlacerNetwork` (ColocRL's attentional LSTM placer),
`hierarchical_network.HierarchicalNetwork` (the hierarchical planner's grouper
and placer, trained jointly), `value_network.GraphValueNetwork` (the value
baseline), `heads` (masked categorical output heads), and Placeto's
`placeto_network.PlacetoNetwork` / `PlacetoValueNetwork` over
`graph_embedding` (message passing, pooled summaries) and `placeto_inputs`;
GDP's `gdp_network.GDPNetwork` (`graphsage`, `segment_attention`) and Mars's
`mars_network.MarsNetwork` (`gcn`, pre-trained by `tfplace.rl.contrastive`,
and `segment_seq2seq`); `unit_placer`, the one-shot placers' shared head.
"""
