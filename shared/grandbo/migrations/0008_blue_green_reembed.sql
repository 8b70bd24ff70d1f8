-- Blue/green re-embedding (a new embedding model, a new embed_rev). The projection's
-- vector columns hold what queries are served from; while a tenant is re-embedded, the
-- new model's vectors wait here, and the tenant switches to them in one transaction once
-- they cover enough of its active entries. Derived data like the vector columns: not in
-- the event log, not part of a rebuild.
CREATE TABLE org_memory_staged_vectors (
    tenant_id text NOT NULL,
    entry_id uuid NOT NULL,
    embed_rev text NOT NULL,
    revision int NOT NULL,
    embedding vector(1024) NOT NULL,
    embedded_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- no foreign key: a rebuild replaces the projection's rows under it; a staged vector
    -- counts only while it matches an active entry's current revision
    PRIMARY KEY (tenant_id, embed_rev, entry_id)
);
ALTER TABLE org_memory_staged_vectors ALTER COLUMN embedding SET STORAGE PLAIN;

-- The embed_rev a tenant's queries use while a switch is in progress (no row: the
-- previous model's, until its switch).
CREATE TABLE org_memory_embed_serving (
    tenant_id text PRIMARY KEY,
    embed_rev text NOT NULL,
    switched_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

ALTER TABLE org_memory_staged_vectors ENABLE ROW LEVEL SECURITY;
ALTER TABLE org_memory_staged_vectors FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON org_memory_staged_vectors
    USING (tenant_id = grandbo_current_tenant()) WITH CHECK (tenant_id = grandbo_current_tenant());
ALTER TABLE org_memory_embed_serving ENABLE ROW LEVEL SECURITY;
ALTER TABLE org_memory_embed_serving FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON org_memory_embed_serving
    USING (tenant_id = grandbo_current_tenant()) WITH CHECK (tenant_id = grandbo_current_tenant());

GRANT SELECT, INSERT, UPDATE, DELETE ON org_memory_staged_vectors TO grandbo_app;
GRANT SELECT, INSERT, UPDATE ON org_memory_embed_serving TO grandbo_app;
