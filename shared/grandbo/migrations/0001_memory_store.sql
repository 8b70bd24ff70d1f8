-- Grandbo memory store: append-only events, the queried projection, per-tenant tag
-- statistics for BM25, row-level security on a transaction-local tenant setting.

CREATE EXTENSION IF NOT EXISTS vector;

-- The application role owns nothing, cannot bypass RLS and only gets DML it needs.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'grandbo_app') THEN
        CREATE ROLE grandbo_app LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
    END IF;
END
$$;

-- The tenant of the current transaction, or NULL (matching no row) when unset or empty.
CREATE FUNCTION grandbo_current_tenant() RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT NULLIF(current_setting('grandbo.tenant_id', true), '') $$;

CREATE TABLE org_memory_events (
    event_id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id       text        NOT NULL CHECK (tenant_id <> ''),
    entry_id        uuid        NOT NULL,
    event_type      text        NOT NULL CHECK (event_type IN
                        ('entry_created', 'entry_corrected', 'entry_retired', 'entry_superseded')),
    revision        integer     NOT NULL CHECK (revision >= 1),
    payload         jsonb       NOT NULL,
    actor           text        NOT NULL CHECK (actor <> ''),
    idempotency_key text        NOT NULL CHECK (idempotency_key <> ''),
    recorded_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT org_memory_events_idempotency UNIQUE (tenant_id, idempotency_key)
);
CREATE INDEX org_memory_events_entry ON org_memory_events (tenant_id, entry_id, event_id);

-- Append-only, enforced for every role (superusers included): no UPDATE, DELETE, TRUNCATE.
CREATE FUNCTION org_memory_events_append_only() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'org_memory_events is append-only: % is not allowed', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER org_memory_events_no_update_delete
    BEFORE UPDATE OR DELETE ON org_memory_events
    FOR EACH ROW EXECUTE FUNCTION org_memory_events_append_only();
CREATE TRIGGER org_memory_events_no_truncate
    BEFORE TRUNCATE ON org_memory_events
    FOR EACH STATEMENT EXECUTE FUNCTION org_memory_events_append_only();

CREATE TABLE org_memory_entries (
    tenant_id         text        NOT NULL CHECK (tenant_id <> ''),
    entry_id          uuid        NOT NULL,
    title             text        NOT NULL,
    summary           text        NOT NULL,
    tags              text[]      NOT NULL
                          CHECK (array_position(tags, NULL) IS NULL AND array_position(tags, '') IS NULL),
    service           text,
    origin            text        NOT NULL CHECK (origin IN ('incident', 'admin', 'correction')),
    status            text        NOT NULL CHECK (status IN ('active', 'retired', 'superseded')),
    revision          integer     NOT NULL CHECK (revision >= 1),
    incident_id       text,
    superseded_by     uuid,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    -- Derived: written only by the embed worker, only for the revision it embedded.
    embedding         vector(1024),
    embed_rev         text,
    embedded_revision integer,
    embedded_at       timestamptz,
    PRIMARY KEY (tenant_id, entry_id),
    CONSTRAINT org_memory_entries_embedding_stamped
        CHECK ((embedding IS NULL) = (embed_rev IS NULL) AND (embedding IS NULL) = (embedded_revision IS NULL))
);
-- Keep the 4 KB vector inline: an exact scan reads it without detoasting (measured ~2x).
ALTER TABLE org_memory_entries ALTER COLUMN embedding SET STORAGE PLAIN;
CREATE INDEX org_memory_entries_tags ON org_memory_entries USING gin (tags);
CREATE INDEX org_memory_entries_active ON org_memory_entries (tenant_id, status, service);

-- Per-tenant statistics for BM25 over tag sets, kept current by the write path.
CREATE TABLE org_memory_tag_stats (
    tenant_id  text    NOT NULL,
    tag        text    NOT NULL,
    doc_count  integer NOT NULL CHECK (doc_count >= 0),
    PRIMARY KEY (tenant_id, tag)
);
CREATE TABLE org_memory_tenant_stats (
    tenant_id       text    PRIMARY KEY,
    active_entries  integer NOT NULL CHECK (active_entries >= 0),
    active_tag_total bigint NOT NULL CHECK (active_tag_total >= 0)
);

-- Tenant ids only (no memory content), so a sweeper can visit each tenant under its own scope.
CREATE TABLE org_memory_tenants (
    tenant_id  text        PRIMARY KEY CHECK (tenant_id <> ''),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Row-level security, enabled and forced, on the transaction-local tenant setting.
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['org_memory_events', 'org_memory_entries',
                             'org_memory_tag_stats', 'org_memory_tenant_stats']
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format(
            'CREATE POLICY tenant_isolation ON %I USING (tenant_id = grandbo_current_tenant()) '
            'WITH CHECK (tenant_id = grandbo_current_tenant())', t);
    END LOOP;
END
$$;

GRANT SELECT, INSERT ON org_memory_events TO grandbo_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON org_memory_entries TO grandbo_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON org_memory_tag_stats TO grandbo_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON org_memory_tenant_stats TO grandbo_app;
GRANT SELECT, INSERT ON org_memory_tenants TO grandbo_app;
GRANT EXECUTE ON FUNCTION grandbo_current_tenant() TO grandbo_app;
