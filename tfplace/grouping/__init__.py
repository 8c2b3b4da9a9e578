"""Grouping: colocation groups (hard constraints) and group-level views.

`tfplace.grouping.group_graph` builds a `GroupGraph` (ops merged into groups,
costs and bytes summed) for partitioners and learned placers.
"""
