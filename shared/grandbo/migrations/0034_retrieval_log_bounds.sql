-- Issue 44: the retrieval log keeps no secret and no surprise.
--
-- 1. Redaction reaches the log. A redaction rewrites the logged topics that quote the
--    entry's text, and takes the redacted incident's id off its rows, in its own
--    transaction (grandbo.memory.repository.redaction): the application role may now
--    update those two columns, and marks each row it went over (`scrubbed`), which
--    `grandbo audit` checks. A retrieval written after its hit's entry was redacted (the
--    writer files answers a moment after they were sent) keeps no topic at all.
ALTER TABLE org_memory_retrievals ADD COLUMN scrubbed boolean NOT NULL DEFAULT false;
GRANT UPDATE (topic, incident_id, scrubbed) ON org_memory_retrievals TO grandbo_app;
-- the rows that served an entry (a redaction's and the audit's question)
CREATE INDEX org_memory_retrievals_hits ON org_memory_retrievals USING gin (hits jsonb_path_ops);
-- the questions memory served nothing for, newest first (the unanswered page, bounded)
CREATE INDEX org_memory_retrievals_unanswered
    ON org_memory_retrievals (tenant_id, at DESC, retrieval_id DESC)
    WHERE jsonb_array_length(hits) = 0;

-- the newest questions that named an incident (the incidents page's bounded read)
CREATE INDEX org_memory_retrievals_named
    ON org_memory_retrievals (tenant_id, at DESC) WHERE incident_id IS NOT NULL;

-- An admin removes one logged question (a secret typed into a topic); what is kept of it
-- is who, when, why and its topic's SHA-256. Never updated; deleted only by the
-- organization's purge (topology_no_delete, 0020).
CREATE TABLE org_memory_log_removals (
    tenant_id     text NOT NULL,
    retrieval_id  uuid NOT NULL,
    topic_sha256  text NOT NULL CHECK (topic_sha256 ~ '^[0-9a-f]{64}$'),
    actor         text NOT NULL CHECK (length(actor) BETWEEN 1 AND 200),
    reason        text NOT NULL CHECK (length(reason) BETWEEN 1 AND 2000),
    removed_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (tenant_id, retrieval_id)
);
ALTER TABLE org_memory_log_removals ENABLE ROW LEVEL SECURITY;
ALTER TABLE org_memory_log_removals FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON org_memory_log_removals
    USING (tenant_id = grandbo_current_tenant())
    WITH CHECK (tenant_id = grandbo_current_tenant());
CREATE TRIGGER org_memory_log_removals_no_delete
    BEFORE DELETE ON org_memory_log_removals
    FOR EACH ROW EXECUTE FUNCTION topology_no_delete();
GRANT SELECT, INSERT ON org_memory_log_removals TO grandbo_app;

-- 2. Bounded by design.
--    a. At most `retrieval_rows_per_day` rows per organization and day (NULL: the default
--       the writer sends, grandbo.memory.retrievals.RETRIEVAL_ROWS_PER_DAY); what
--       the bound drops is counted, per day, for the health page.
ALTER TABLE org_memory_tenant_settings
    ADD COLUMN retrieval_rows_per_day integer
        CHECK (retrieval_rows_per_day BETWEEN 1 AND 1000000),
    ADD COLUMN query_rate_per_minute integer
        CHECK (query_rate_per_minute BETWEEN 1 AND 100000);

CREATE TABLE org_memory_retrieval_days (
    tenant_id  text NOT NULL,
    day        date NOT NULL,
    logged     integer NOT NULL DEFAULT 0 CHECK (logged >= 0),
    dropped    integer NOT NULL DEFAULT 0 CHECK (dropped >= 0),
    PRIMARY KEY (tenant_id, day)
);
ALTER TABLE org_memory_retrieval_days ENABLE ROW LEVEL SECURITY;
ALTER TABLE org_memory_retrieval_days FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON org_memory_retrieval_days
    USING (tenant_id = grandbo_current_tenant())
    WITH CHECK (tenant_id = grandbo_current_tenant());
GRANT SELECT, INSERT, UPDATE, DELETE ON org_memory_retrieval_days TO grandbo_app;

-- (0032's function, with the day's bound: `p_rows_per_day` is the default an organization
-- that set none is held to, grandbo.memory.retrievals.RETRIEVAL_ROWS_PER_DAY)
DROP FUNCTION grandbo_log_retrieval(
    text, timestamptz, text, text, text, jsonb, double precision, boolean);
CREATE FUNCTION grandbo_log_retrieval(
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
BEGIN
    PERFORM set_config('grandbo.tenant_id', p_tenant, true);
    PERFORM pg_advisory_xact_lock_shared(hashtextextended('grandbo.tenant:' || p_tenant, 0));
    INSERT INTO org_memory_tenants (tenant_id) VALUES (p_tenant) ON CONFLICT DO NOTHING;
    SELECT coalesce(s.retrieval_rows_per_day, p_rows_per_day) INTO cap
      FROM (SELECT 1) one
      LEFT JOIN org_memory_tenant_settings s ON s.tenant_id = p_tenant;
    -- the day's count, one row per organization and day (the writer's statements of one
    -- organization queue here: a handful a second at most, by the query rate)
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
    -- an answer filed after one of its hits was redacted keeps nothing of its topic: the
    -- redaction's rewrite ran before this row existed
    IF EXISTS (
        SELECT 1 FROM jsonb_array_elements(p_hits) h
        JOIN org_memory_entries e
          ON e.tenant_id = p_tenant AND e.entry_id = (h->>'entry_id')::uuid
        WHERE e.status = 'redacted'
    ) THEN
        topic := '[redacted]';
    END IF;
    INSERT INTO org_memory_retrievals
        (tenant_id, at, caller, incident_id, topic, hits, latency_ms, no_precedent, scrubbed)
    VALUES (p_tenant, p_at, p_caller, p_incident, topic, p_hits, p_latency_ms, p_no_precedent,
            topic <> p_topic);
END
$$;
REVOKE ALL ON FUNCTION grandbo_log_retrieval(
    text, timestamptz, text, text, text, jsonb, double precision, boolean, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION grandbo_log_retrieval(
    text, timestamptz, text, text, text, jsonb, double precision, boolean, integer)
    TO grandbo_app;

--    b. Queries per caller and minute: `grandbo_admit_query` counts the caller's queries in
--       the current minute and answers 0 (admitted) or the seconds until the next minute
--       (refused: a 429 with Retry-After). The limit is the organization's
--       `query_rate_per_minute`, else `p_default` (grandbo.memory.query_rate). A caller's
--       older minutes go as it asks.
CREATE TABLE org_memory_query_minutes (
    tenant_id  text NOT NULL,
    caller     text NOT NULL CHECK (length(caller) BETWEEN 1 AND 200),
    minute     timestamptz NOT NULL,
    asked      integer NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, caller, minute)
);
ALTER TABLE org_memory_query_minutes ENABLE ROW LEVEL SECURITY;
ALTER TABLE org_memory_query_minutes FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON org_memory_query_minutes
    USING (tenant_id = grandbo_current_tenant())
    WITH CHECK (tenant_id = grandbo_current_tenant());
GRANT SELECT, INSERT, UPDATE, DELETE ON org_memory_query_minutes TO grandbo_app;

CREATE FUNCTION grandbo_admit_query(
    p_tenant text, p_caller text, p_at timestamptz, p_default integer)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    rate integer;
    this_minute timestamptz := date_trunc('minute', p_at);
    counted integer;
BEGIN
    PERFORM set_config('grandbo.tenant_id', p_tenant, true);
    SELECT coalesce(s.query_rate_per_minute, p_default) INTO rate
      FROM (SELECT 1) one
      LEFT JOIN org_memory_tenant_settings s ON s.tenant_id = p_tenant;
    INSERT INTO org_memory_query_minutes AS m (tenant_id, caller, minute, asked)
    VALUES (p_tenant, p_caller, this_minute, 1)
    ON CONFLICT (tenant_id, caller, minute) DO UPDATE SET asked = m.asked + 1
    RETURNING m.asked INTO counted;
    IF counted = 1 THEN  -- the caller's first of this minute: its earlier minutes go
        DELETE FROM org_memory_query_minutes
         WHERE tenant_id = p_tenant AND caller = p_caller AND minute < this_minute;
    END IF;
    IF counted > rate THEN
        RETURN greatest(1, ceil(extract(epoch FROM this_minute + interval '1 minute' - p_at)));
    END IF;
    RETURN 0;
END
$$;
REVOKE ALL ON FUNCTION grandbo_admit_query(text, text, timestamptz, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION grandbo_admit_query(text, text, timestamptz, integer) TO grandbo_app;
