"""Grouping: colocation groups (hard constraints) and group-level views.

`tfplace.grouping.group_graph` builds a `GroupGraph` (ops merged into groups,
costs and bytes summed) for partitioners and learned placers;
`coarsen` merges the colocation groups into K groups (heavy-edge or METIS)
for the search placers, and `chunks` gives the units the learned placers
place (topological chunks split by the start placement's devices).
"""
