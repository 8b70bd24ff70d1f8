"""The memory core: entries and their events, the topic contract, hybrid recall (tag BM25
+ vector, fused by RRF), the write commands, and the repository that holds their SQL."""
