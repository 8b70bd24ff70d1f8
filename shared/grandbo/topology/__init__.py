"""The knowledge-graph tier: typed, bi-temporal nodes and edges, blast radius and
criticality, and the services a memory query's scope reaches."""
