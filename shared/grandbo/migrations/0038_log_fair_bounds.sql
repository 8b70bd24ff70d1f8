-- Issue 51: the retrieval log's day, fair to every caller, and its gaps counted.
--
-- 1. One caller cannot take the organization's day. Each caller (a key, a person: one
--    identity whichever door it asks through) keeps at most a quarter of the
--    organization's rows per day (`retrieval_rows_per_day`, else the default the writer
--    sends): a flood fills its own quarter and is dropped there, counted by caller, while
--    every other caller's questions are still kept. The organization's total stays the
--    ceiling.
CREATE TABLE org_memory_retrieval_caller_days (
    tenant_id  text NOT NULL,
    day        date NOT NULL,
    caller     text NOT NULL CHECK (length(caller) BETWEEN 1 AND 300),
    logged     integer NOT NULL DEFAULT 0 CHECK (logged >= 0),
    dropped    integer NOT NULL DEFAULT 0 CHECK (dropped >= 0),
    PRIMARY KEY (tenant_id, day, caller)
);
ALTER TABLE org_memory_retrieval_caller_days ENABLE ROW LEVEL SECURITY;
ALTER TABLE org_memory_retrieval_caller_days FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON org_memory_retrieval_caller_days
    USING (tenant_id = grandbo_current_tenant())
    WITH CHECK (tenant_id = grandbo_current_tenant());
GRANT SELECT, INSERT, UPDATE, DELETE ON org_memory_retrieval_caller_days TO grandbo_app;

-- 2. What the log could not write (the writer out of reach, a failover) is counted once it
--    can be: the answering process keeps the count and files it with its next write
--    (grandbo.runtime.retrieval_writer); the health page reports it.
ALTER TABLE org_memory_retrieval_days ADD COLUMN unlogged integer NOT NULL DEFAULT 0
    CHECK (unlogged >= 0);

CREATE FUNCTION grandbo_count_unlogged(p_tenant text, p_day date, p_count integer)
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
BEGIN
    PERFORM set_config('grandbo.tenant_id', p_tenant, true);
    INSERT INTO org_memory_tenants (tenant_id) VALUES (p_tenant) ON CONFLICT DO NOTHING;
    INSERT INTO org_memory_retrieval_days AS d (tenant_id, day, logged, unlogged)
    VALUES (p_tenant, p_day, 0, greatest(p_count, 0))
    ON CONFLICT (tenant_id, day) DO UPDATE SET unlogged = d.unlogged + greatest(p_count, 0);
END
$$;
REVOKE ALL ON FUNCTION grandbo_count_unlogged(text, date, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION grandbo_count_unlogged(text, date, integer) TO grandbo_app;

-- (0035's function, with the caller's quarter)
CREATE OR REPLACE FUNCTION grandbo_log_retrieval(
    p_tenant text, p_at timestamptz, p_caller text, p_incident text, p_topic text,
    p_hits jsonb, p_latency_ms double precision, p_no_precedent boolean,
    p_rows_per_day integer
) RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    cap integer;
    counted integer;
    mine integer;
    v_day date := (p_at AT TIME ZONE 'UTC')::date;
    v_caller text := left(p_caller, 300);
    topic text := p_topic;
    incident text := p_incident;
BEGIN
    PERFORM set_config('grandbo.tenant_id', p_tenant, true);
    PERFORM pg_advisory_xact_lock_shared(hashtextextended('grandbo.tenant:' || p_tenant, 0));
    INSERT INTO org_memory_tenants (tenant_id) VALUES (p_tenant) ON CONFLICT DO NOTHING;
    SELECT coalesce(s.retrieval_rows_per_day, p_rows_per_day) INTO cap
      FROM (SELECT 1) one
      LEFT JOIN org_memory_tenant_settings s ON s.tenant_id = p_tenant;
    -- the caller's own count first: a caller past its quarter is dropped there, and
    -- takes nothing of the organization's day from the others
    INSERT INTO org_memory_retrieval_caller_days AS c (tenant_id, day, caller, logged)
    VALUES (p_tenant, v_day, v_caller, 1)
    ON CONFLICT (tenant_id, day, caller) DO UPDATE SET logged = c.logged + 1
    RETURNING c.logged INTO mine;
    IF mine > greatest(cap / 4, 1) THEN
        UPDATE org_memory_retrieval_caller_days
           SET logged = logged - 1, dropped = dropped + 1
         WHERE tenant_id = p_tenant AND day = v_day AND caller = v_caller;
        INSERT INTO org_memory_retrieval_days AS d (tenant_id, day, logged, dropped)
        VALUES (p_tenant, v_day, 0, 1)
        ON CONFLICT (tenant_id, day) DO UPDATE SET dropped = d.dropped + 1;
        RETURN;
    END IF;
    INSERT INTO org_memory_retrieval_days AS d (tenant_id, day, logged)
    VALUES (p_tenant, v_day, 1)
    ON CONFLICT (tenant_id, day) DO UPDATE SET logged = d.logged + 1
    RETURNING d.logged INTO counted;
    IF counted > cap THEN
        UPDATE org_memory_retrieval_days
           SET logged = logged - 1, dropped = dropped + 1
         WHERE tenant_id = p_tenant AND day = v_day;
        UPDATE org_memory_retrieval_caller_days
           SET logged = logged - 1, dropped = dropped + 1
         WHERE tenant_id = p_tenant AND day = v_day AND caller = v_caller;
        RETURN;
    END IF;
    -- an answer filed after a redaction that ran after it was asked, or after one of its
    -- hits was redacted, keeps nothing of its topic or incident: the redaction's rewrite
    -- ran before this row existed (0035)
    IF EXISTS (
        SELECT 1 FROM org_memory_events
        WHERE tenant_id = p_tenant AND event_type = 'entry_redacted' AND recorded_at >= p_at
    ) OR EXISTS (
        SELECT 1 FROM jsonb_array_elements(p_hits) h
        JOIN org_memory_entries e
          ON e.tenant_id = p_tenant AND e.entry_id = (h->>'entry_id')::uuid
        WHERE e.status = 'redacted'
    ) THEN
        topic := '[redacted]';
        incident := NULL;
    END IF;
    INSERT INTO org_memory_retrievals
        (tenant_id, at, caller, incident_id, topic, hits, latency_ms, no_precedent, scrubbed)
    VALUES (p_tenant, p_at, p_caller, incident, topic, p_hits, p_latency_ms, p_no_precedent,
            topic <> p_topic);
END
$$;
