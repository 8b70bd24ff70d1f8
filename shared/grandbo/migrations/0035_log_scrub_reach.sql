-- Issue 44's break-it review: a redaction's reach into the retrieval log.
--
-- 1. The questions that may quote a redacted text are found by an index, whatever the
--    log holds: a trigram index of the topics answers the case-insensitive search for each
--    telling token (a scan of every question took 5 s at 1 M rows and would outrun the
--    application role's 9 s statement bound past about 2 M).
--    pg_trgm is a trusted extension (an owner with CREATE on the database may add it;
--    Aurora's master user may): where it cannot be added, the search scans, as before.
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
    CREATE INDEX org_memory_retrievals_topic_trgm
        ON org_memory_retrievals USING gin (topic gin_trgm_ops);
EXCEPTION WHEN insufficient_privilege OR undefined_file THEN
    RAISE NOTICE 'pg_trgm not available (%): the log''s scrub scans its questions', SQLERRM;
END
$$;

-- 2. A question asked before a redaction of its organization and filed after it (the
--    writer files answers a moment after they are sent) keeps neither its topic nor its
--    incident: the redaction's rewrite ran before the row existed, whatever it served.
-- (0030's index of redactions by tenant, with their time)
CREATE INDEX org_memory_events_redactions_at
    ON org_memory_events (tenant_id, recorded_at) WHERE event_type = 'entry_redacted';

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
    topic text := p_topic;
    incident text := p_incident;
BEGIN
    PERFORM set_config('grandbo.tenant_id', p_tenant, true);
    PERFORM pg_advisory_xact_lock_shared(hashtextextended('grandbo.tenant:' || p_tenant, 0));
    INSERT INTO org_memory_tenants (tenant_id) VALUES (p_tenant) ON CONFLICT DO NOTHING;
    SELECT coalesce(s.retrieval_rows_per_day, p_rows_per_day) INTO cap
      FROM (SELECT 1) one
      LEFT JOIN org_memory_tenant_settings s ON s.tenant_id = p_tenant;
    INSERT INTO org_memory_retrieval_days AS d (tenant_id, day, logged)
    VALUES (p_tenant, (p_at AT TIME ZONE 'UTC')::date, 1)
    ON CONFLICT (tenant_id, day) DO UPDATE SET logged = d.logged + 1
    RETURNING d.logged INTO counted;
    IF counted > cap THEN
        UPDATE org_memory_retrieval_days
           SET logged = logged - 1, dropped = dropped + 1
         WHERE tenant_id = p_tenant AND day = (p_at AT TIME ZONE 'UTC')::date;
        RETURN;
    END IF;
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
