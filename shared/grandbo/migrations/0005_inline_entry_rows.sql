-- Keep an entry's row whole. The vector (PLAIN, 4 KB) puts every embedded row over the
-- default toast threshold (~2 KB), so PostgreSQL moved every other column it could out to
-- the TOAST table, down to `embed_rev` and `status`: the vector leg then paid a TOAST
-- index lookup per row for its filters (5 buffers per entry instead of 1; measured
-- 33.6 -> 15.2 ms p50 for an exact scan of a 5,000-entry org, docs/BENCHMARKS.md).
-- One row fills a page either way; values are moved out only when a row exceeds a page.
-- Rows written before this migration keep their out-of-line values until rewritten.
ALTER TABLE org_memory_entries SET (toast_tuple_target = 8160);

-- A stored vector is always the current revision's: a correction clears it in the same
-- statement that bumps the revision, and vectors are stored only for the revision they
-- were computed from. Stated as a constraint, the vector leg needs no column-to-column
-- filter (`embedded_revision = revision`), whose default 0.5 % selectivity estimate made
-- the planner think an HNSW scan must walk 200x more of the graph and refuse the index.
ALTER TABLE org_memory_entries ADD CONSTRAINT org_memory_entries_vector_is_current
    CHECK (embedded_revision IS NULL OR embedded_revision = revision);

-- Vector coverage for a query's metadata: active entries keyed by the embedding revision
-- they carry, so "active entries lacking a vector of revision R" reads only those entries
-- (none in the steady state) instead of counting the tenant's whole index range.
CREATE INDEX org_memory_entries_active_embed_rev ON org_memory_entries (tenant_id, embed_rev)
    WHERE status = 'active';
