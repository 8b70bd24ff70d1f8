-- Offboarding (issue 25): an organization purged, every row of it in every table, events
-- and topology included, through one owned function. The tables are read from the
-- catalog (every table of the schema with a tenant_id column, partitions through their
-- parent), so a table added later is purged too without touching this function. One is
-- kept: the spent nonces of signed requests (they hold no memory, expire within minutes,
-- and deleting them would make every request the organization signed in the last minutes,
-- the purge's own confirmation included, replayable).
--
-- The never-delete rules of the event log and the topology tables let exactly this
-- through: a DELETE of the rows of the tenant the transaction is scoped to, while
-- grandbo.purging names that tenant (set only here).
CREATE OR REPLACE FUNCTION org_memory_events_append_only() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE'
       AND current_setting('grandbo.purging', true) = OLD.tenant_id
       AND OLD.tenant_id = grandbo_current_tenant()
    THEN
        RETURN OLD;  -- the organization's purge
    END IF;
    IF TG_OP = 'UPDATE'
       AND current_setting('grandbo.redacting', true) = 'on'
       AND OLD.event_type <> 'entry_redacted'
       AND NEW.event_id = OLD.event_id AND NEW.tenant_id = OLD.tenant_id
       AND NEW.entry_id = OLD.entry_id AND NEW.event_type = OLD.event_type
       AND NEW.revision = OLD.revision AND NEW.actor = OLD.actor
       AND NEW.idempotency_key = OLD.idempotency_key AND NEW.recorded_at = OLD.recorded_at
       AND NEW.payload = jsonb_build_object(
               'redacted', true,
               'sha256', encode(sha256(convert_to(OLD.payload::text, 'UTF8')), 'hex'))
       AND EXISTS (
           SELECT 1 FROM org_memory_events r
           WHERE r.tenant_id = OLD.tenant_id AND r.entry_id = OLD.entry_id
             AND r.event_type = 'entry_redacted')
    THEN
        RETURN NEW;  -- the redaction of an entry whose redaction is recorded (0019)
    END IF;
    RAISE EXCEPTION 'org_memory_events is append-only: % is not allowed', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;

CREATE OR REPLACE FUNCTION topology_no_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('grandbo.purging', true) = OLD.tenant_id
       AND OLD.tenant_id = grandbo_current_tenant()
    THEN
        RETURN OLD;  -- the organization's purge
    END IF;
    RAISE EXCEPTION '% rows are never deleted; invalidate them (invalid_at)', TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END
$$;

-- The tables a purge empties of the organization, for the purge and for its preview
CREATE FUNCTION grandbo_tenant_tables() RETURNS SETOF text
    LANGUAGE sql STABLE SET search_path = public, pg_temp AS $$
    SELECT c.relname::text FROM pg_class c
    JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped
    WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')
      AND NOT c.relispartition AND c.relname <> 'admin_request_nonces'
    ORDER BY c.relname
$$;
GRANT EXECUTE ON FUNCTION grandbo_tenant_tables() TO grandbo_app;

CREATE FUNCTION grandbo_purge_tenant(p_tenant text)
    RETURNS TABLE (table_name text, deleted bigint)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    t text;
    n bigint;
BEGIN
    IF p_tenant IS NULL OR p_tenant IS DISTINCT FROM grandbo_current_tenant() THEN
        RAISE EXCEPTION 'purge of another tenant' USING ERRCODE = 'insufficient_privilege';
    END IF;
    PERFORM set_config('grandbo.purging', p_tenant, true);
    FOR t IN SELECT * FROM grandbo_tenant_tables() LOOP
        EXECUTE format('DELETE FROM %I WHERE tenant_id = $1', t) USING p_tenant;
        GET DIAGNOSTICS n = ROW_COUNT;
        table_name := t;
        deleted := n;
        RETURN NEXT;
    END LOOP;
    PERFORM set_config('grandbo.purging', '', true);
END
$$;
REVOKE ALL ON FUNCTION grandbo_purge_tenant(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION grandbo_purge_tenant(text) TO grandbo_app;
