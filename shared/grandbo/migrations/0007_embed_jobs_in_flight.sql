-- When the sweeper last put an entry's embed job on the queue. The sweeper skips entries
-- whose job is still in flight (enqueued within its window), so a sweep every few minutes
-- no longer re-sends every pending entry and pays Bedrock again for each duplicate.
-- Operational state, like the embedding columns: not in the event log, not part of a
-- rebuild (a rebuilt entry is simply eligible again).
ALTER TABLE org_memory_entries ADD COLUMN embed_enqueued_at timestamptz;
