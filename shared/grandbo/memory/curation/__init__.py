"""What a curator reads and does over the service: the catalog, history, growth,
settings, merges and verdicts on pairs (curator), and the memory's health (audit)."""
