-- The switch check of a blue/green re-embed counts active entries without a current
-- staged vector. Both sides as narrow indexes (an entry row carries its 4 KB vector
-- inline, a staged row too), so the anti-join reads index pages, not every vector.
CREATE INDEX org_memory_entries_active_revision
    ON org_memory_entries (tenant_id, entry_id, revision) WHERE status = 'active';
CREATE INDEX org_memory_staged_vectors_revision
    ON org_memory_staged_vectors (tenant_id, embed_rev, entry_id) INCLUDE (revision);
