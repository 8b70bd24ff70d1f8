"""The memory's domain: its models and the rules every other part applies (the topic and
content contracts, fusion, the recurrence rule, idempotency keys, the projection fold, the
lake stream's format, the recalibration's arithmetic, the retrieval log's records, the
embed queue's port). Pure: nothing here reads a store or a clock of its own."""
