-- Entries hash-partitioned by organization (issue 16, item 2). Every statement on the
-- entries table is planned against every index of the table it reads, and each
-- organization past HNSW_MIN_ENTRIES brings its own partial HNSW index: in one table the
-- planning of a search's statements on entries grew 0.46 -> 1.67 -> 6.85 -> 43.99 ms from
-- 0 to 60, 250 and 1,000 such indexes, paid by every organization's every query
-- (`bench/layout_planning.py`, docs/BENCHMARKS.md). Partitioned, a statement stating its
-- tenant is planned against that tenant's partition alone: 1.14 ms at 60 indexes and
-- 2.26 at 1,000 with 16 partitions. The per-organization indexes go on the partition that
-- holds the organization (grandbo.memory.vector_index).
--
-- The rows are copied once, under an exclusive lock (docs/OPERATIONS.md: how long, and
-- what callers see meanwhile). The per-organization HNSW indexes go with the old table;
-- the hourly index job rebuilds them on the partitions, as after 0015.
ALTER TABLE org_memory_entries RENAME TO org_memory_entries_unpartitioned;
-- The copy reads every tenant's rows. Row-level security is forced on the table and the
-- schema owner is not a superuser in Aurora (as in 0006): forced, the copy would read no
-- row at all, so it is lifted on the table being emptied.
ALTER TABLE org_memory_entries_unpartitioned NO FORCE ROW LEVEL SECURITY;

CREATE TABLE org_memory_entries (
    LIKE org_memory_entries_unpartitioned
        INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE INCLUDING COMMENTS
) PARTITION BY HASH (tenant_id);

DO $$
BEGIN
    FOR n IN 0..15 LOOP
        EXECUTE format(
            'CREATE TABLE %I PARTITION OF org_memory_entries'
            ' FOR VALUES WITH (MODULUS 16, REMAINDER %s)',
            format('org_memory_entries_p%s', lpad(n::text, 2, '0')), n);
        -- migration 0005: an entry's row stays whole (set per partition: a partitioned
        -- table holds no storage of its own)
        EXECUTE format(
            'ALTER TABLE %I SET (toast_tuple_target = 8160)',
            format('org_memory_entries_p%s', lpad(n::text, 2, '0')));
    END LOOP;
END $$;

INSERT INTO org_memory_entries SELECT * FROM org_memory_entries_unpartitioned;
-- nothing is dropped unless every row arrived
DO $$
DECLARE
    copied bigint := (SELECT count(*) FROM org_memory_entries);
    held bigint := (SELECT count(*) FROM org_memory_entries_unpartitioned);
BEGIN
    IF copied <> held THEN
        RAISE EXCEPTION '0016: % of % entries copied; nothing changed', copied, held;
    END IF;
END $$;
DROP TABLE org_memory_entries_unpartitioned;

-- the indexes of migrations 0001-0012, on every partition
ALTER TABLE org_memory_entries ADD PRIMARY KEY (tenant_id, entry_id);
CREATE INDEX org_memory_entries_tags ON org_memory_entries USING gin (tags);
CREATE INDEX org_memory_entries_coverage ON org_memory_entries (tenant_id, status)
    INCLUDE (embed_rev, embedded_revision, revision, service);
CREATE INDEX org_memory_entries_active_embed_rev ON org_memory_entries (tenant_id, embed_rev)
    WHERE status = 'active';
CREATE INDEX org_memory_entries_active_revision
    ON org_memory_entries (tenant_id, entry_id, revision) WHERE status = 'active';
CREATE INDEX org_memory_entries_expiring
    ON org_memory_entries (tenant_id, expires_at) WHERE status = 'active' AND kind = 'episodic';
CREATE INDEX org_memory_entries_merged
    ON org_memory_entries (tenant_id, merged_into) WHERE merged_into IS NOT NULL;

ALTER TABLE org_memory_entries ENABLE ROW LEVEL SECURITY;
ALTER TABLE org_memory_entries FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON org_memory_entries
    USING (tenant_id = grandbo_current_tenant()) WITH CHECK (tenant_id = grandbo_current_tenant());
-- The application reaches entries through the parent, whose policy applies. The
-- partitions carry the same policy, forced, so one read directly (by the schema owner's
-- mistake) is still one tenant's.
DO $$
BEGIN
    FOR n IN 0..15 LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY',
            format('org_memory_entries_p%s', lpad(n::text, 2, '0')));
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY',
            format('org_memory_entries_p%s', lpad(n::text, 2, '0')));
        EXECUTE format(
            'CREATE POLICY tenant_isolation ON %I USING (tenant_id = grandbo_current_tenant())'
            ' WITH CHECK (tenant_id = grandbo_current_tenant())',
            format('org_memory_entries_p%s', lpad(n::text, 2, '0')));
    END LOOP;
END $$;
GRANT SELECT, INSERT, UPDATE, DELETE ON org_memory_entries TO grandbo_app;
ANALYZE org_memory_entries;
