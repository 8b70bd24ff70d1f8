-- Issue 26: a person's verdict that two entries the console suggested as possible
-- duplicates are distinct lessons, so the pair is not suggested again. Stored once per
-- unordered pair (entry_a < entry_b); not memory (nothing served changes), so not in the
-- event log: who said so and when is kept beside it. Purged with the organization
-- (grandbo_tenant_tables() lists every table with a tenant_id).
CREATE TABLE org_memory_distinct_pairs (
    tenant_id   text        NOT NULL CHECK (tenant_id <> ''),
    entry_a     uuid        NOT NULL,
    entry_b     uuid        NOT NULL,
    actor       text        NOT NULL CHECK (actor <> ''),
    recorded_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (tenant_id, entry_a, entry_b),
    CHECK (entry_a < entry_b)
);
ALTER TABLE org_memory_distinct_pairs ENABLE ROW LEVEL SECURITY;
ALTER TABLE org_memory_distinct_pairs FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON org_memory_distinct_pairs
    USING (tenant_id = grandbo_current_tenant()) WITH CHECK (tenant_id = grandbo_current_tenant());
GRANT SELECT, INSERT ON org_memory_distinct_pairs TO grandbo_app;
