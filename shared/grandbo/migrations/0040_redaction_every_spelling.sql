-- Issue 52: a redaction that holds at any size and in any spelling, with a receipt.
--
-- 1. The retrieval log's spellings. PostgreSQL uses a qual as an index condition ahead of
--    a row-level-security policy only when its operator is LEAKPROOF; LIKE, ILIKE and @>
--    are not, and only a superuser may mark a function so (Aurora's master user is not).
--    On the forced-RLS log the application role's trigram and `hits` searches were full
--    scans of the organization's questions (3.6 s at 1 M rows). Each question's spellings
--    (grandbo.text.spelling: compatibility form, look-alikes mapped, case folded, nothing
--    but letters and digits, its base64 tokens decoded; its incident id's too) and the
--    entries it served are kept beside it in a table whose row-level security is enabled
--    and NOT forced: the application role reads and writes it under its policy, and one
--    function owned by the schema's owner (grandbo_log_reach, SECURITY DEFINER, searching
--    only the caller's own scope) searches it by its indexes. The table is the log's
--    index: it holds nothing the question does not (deleted with it, rewritten with it).
CREATE TABLE org_memory_retrieval_spellings (
    tenant_id     text NOT NULL,
    retrieval_id  uuid NOT NULL,
    spelled       text NOT NULL,
    served        uuid[] NOT NULL,
    PRIMARY KEY (tenant_id, retrieval_id),
    FOREIGN KEY (tenant_id, retrieval_id)
        REFERENCES org_memory_retrievals (tenant_id, retrieval_id) ON DELETE CASCADE
);
ALTER TABLE org_memory_retrieval_spellings ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON org_memory_retrieval_spellings
    USING (tenant_id = grandbo_current_tenant())
    WITH CHECK (tenant_id = grandbo_current_tenant());
GRANT SELECT, INSERT, UPDATE, DELETE ON org_memory_retrieval_spellings TO grandbo_app;
CREATE INDEX org_memory_retrieval_spellings_served
    ON org_memory_retrieval_spellings USING gin (served);

-- What the database can spell without Python (the questions logged before this migration,
-- and a writer of code older than it): compatibility form, case folded, letters and
-- digits. `grandbo audit` re-spells those rows with every rule (they are marked below).
CREATE FUNCTION grandbo_spelling(p_text text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT lower(regexp_replace(normalize(coalesce(p_text, ''), NFKC), '[^[:alnum:]]+', '', 'g'))
$$;

ALTER TABLE org_memory_retrieval_spellings ADD COLUMN full_rules boolean NOT NULL DEFAULT true;
ALTER TABLE org_memory_retrievals NO FORCE ROW LEVEL SECURITY;
INSERT INTO org_memory_retrieval_spellings (tenant_id, retrieval_id, spelled, served, full_rules)
SELECT r.tenant_id, r.retrieval_id,
       grandbo_spelling(r.topic) || ' ' || grandbo_spelling(r.incident_id),
       ARRAY(SELECT (h->>'entry_id')::uuid FROM jsonb_array_elements(r.hits) h),
       false
  FROM org_memory_retrievals r;
ALTER TABLE org_memory_retrievals FORCE ROW LEVEL SECURITY;
CREATE INDEX org_memory_retrieval_spellings_approximate
    ON org_memory_retrieval_spellings (tenant_id) WHERE NOT full_rules;

DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
    CREATE INDEX org_memory_retrieval_spellings_trgm
        ON org_memory_retrieval_spellings USING gin (spelled gin_trgm_ops);
EXCEPTION WHEN insufficient_privilege OR undefined_file THEN
    RAISE NOTICE 'pg_trgm not available (%): the log''s scrub scans its spellings', SQLERRM;
END
$$;
-- the application role's trigram search of the topics could never use 0035's index
DROP INDEX IF EXISTS org_memory_retrievals_topic_trgm;

-- The questions of the caller's scope that served one of `p_served`, or whose spellings
-- hold one of `p_patterns` (LIKE patterns, their wildcards escaped by the caller), each
-- through its index: as the owner, the table's policy is not in the way of the index.
-- Only the scope's own organization: the caller set it (grandbo_scope) in this transaction.
CREATE FUNCTION grandbo_log_reach(p_tenant text, p_patterns text[], p_served uuid[])
RETURNS TABLE (retrieval_id uuid, tied boolean)
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    pattern text;
BEGIN
    IF p_tenant IS NULL OR p_tenant IS DISTINCT FROM grandbo_current_tenant() THEN
        RAISE EXCEPTION 'grandbo_log_reach searches its own scope''s organization only'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF cardinality(p_served) > 0 THEN
        RETURN QUERY EXECUTE
            'SELECT s.retrieval_id, true FROM org_memory_retrieval_spellings s'
            ' WHERE s.served && $2 AND s.tenant_id = $1'
            USING p_tenant, p_served;
    END IF;
    FOREACH pattern IN ARRAY coalesce(p_patterns, '{}') LOOP
        -- planned with the pattern itself (EXECUTE): the trigram index for each
        RETURN QUERY EXECUTE
            'SELECT s.retrieval_id, false FROM org_memory_retrieval_spellings s'
            ' WHERE s.spelled LIKE $2 AND s.tenant_id = $1'
            USING p_tenant, pattern;
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION grandbo_log_reach(text, text[], uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION grandbo_log_reach(text, text[], uuid[]) TO grandbo_app;

-- 2. What a redaction removed, kept so a question filed after it is checked on write: per
--    organization a random salt, and the SHA-256 of the salt and each spelling removed
--    (grandbo.text.spelling.spelling_digest), never the spelling.
CREATE TABLE org_memory_spelling_salts (
    tenant_id  text PRIMARY KEY,
    salt       bytea NOT NULL DEFAULT uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid())
);
CREATE TABLE org_memory_redacted_spellings (
    tenant_id  text NOT NULL,
    length     integer NOT NULL CHECK (length BETWEEN 4 AND 2000),
    digest     bytea NOT NULL CHECK (length(digest) = 32),
    entry_id   uuid NOT NULL,  -- the redaction that removed it
    PRIMARY KEY (tenant_id, length, digest, entry_id)
);
CREATE INDEX org_memory_redacted_spellings_entry
    ON org_memory_redacted_spellings (tenant_id, entry_id);
ALTER TABLE org_memory_spelling_salts ENABLE ROW LEVEL SECURITY;
ALTER TABLE org_memory_spelling_salts FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON org_memory_spelling_salts
    USING (tenant_id = grandbo_current_tenant())
    WITH CHECK (tenant_id = grandbo_current_tenant());
ALTER TABLE org_memory_redacted_spellings ENABLE ROW LEVEL SECURITY;
ALTER TABLE org_memory_redacted_spellings FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON org_memory_redacted_spellings
    USING (tenant_id = grandbo_current_tenant())
    WITH CHECK (tenant_id = grandbo_current_tenant());
GRANT SELECT, INSERT, DELETE ON org_memory_spelling_salts, org_memory_redacted_spellings
    TO grandbo_app;

-- Whether any window of `p_spelled` is a spelling the organization redacted: one digest
-- per window and length, each looked up by equality (leakproof: the primary key serves it
-- under the policy). False at once for an organization that never redacted. The windows
-- are slices of the text's characters taken once (substr() rescans a multi-byte text
-- from its start at every window: quadratic), over its first 8,000 characters (a topic
-- holds at most 8,000; a longer spelling is one NFKC swelled; the audit re-verifies it
-- whole).
CREATE FUNCTION grandbo_spells_redacted(p_tenant text, p_spelled text) RETURNS boolean
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_salt bytea;
    v_chars text[];
    v_n integer;
    v_length integer;
BEGIN
    SELECT salt INTO v_salt FROM org_memory_spelling_salts WHERE tenant_id = p_tenant;
    IF v_salt IS NULL OR p_spelled IS NULL THEN
        RETURN false;
    END IF;
    v_chars := string_to_array(left(p_spelled, 8000), NULL);
    v_n := coalesce(array_length(v_chars, 1), 0);
    FOR v_length IN
        SELECT DISTINCT s.length FROM org_memory_redacted_spellings s
         WHERE s.tenant_id = p_tenant AND s.length <= v_n
    LOOP
        IF EXISTS (
            SELECT 1 FROM generate_series(1, v_n - v_length + 1) AS i
             WHERE EXISTS (
                 SELECT 1 FROM org_memory_redacted_spellings s
                  WHERE s.tenant_id = p_tenant AND s.length = v_length
                    AND s.digest = sha256(v_salt || convert_to(
                        array_to_string(v_chars[i:i + v_length - 1], ''), 'UTF8')))
        ) THEN
            RETURN true;
        END IF;
    END LOOP;
    RETURN false;
END
$$;
GRANT EXECUTE ON FUNCTION grandbo_spells_redacted(text, text) TO grandbo_app;

-- 0038's write with the question's spellings: kept beside it, and checked against what
-- the organization redacted (a match keeps neither its topic nor its incident). NULL
-- spellings (a writer of code older than this migration): the database's, marked.
CREATE FUNCTION grandbo_log_retrieval(
    p_tenant text, p_at timestamptz, p_caller text, p_incident text, p_topic text,
    p_hits jsonb, p_latency_ms double precision, p_no_precedent boolean,
    p_rows_per_day integer, p_spelled text
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
    spelled text := coalesce(
        p_spelled, grandbo_spelling(p_topic) || ' ' || grandbo_spelling(p_incident));
    v_id uuid := gen_random_uuid();
BEGIN
    PERFORM set_config('grandbo.tenant_id', p_tenant, true);
    PERFORM pg_advisory_xact_lock_shared(hashtextextended('grandbo.tenant:' || p_tenant, 0));
    INSERT INTO org_memory_tenants (tenant_id) VALUES (p_tenant) ON CONFLICT DO NOTHING;
    SELECT coalesce(s.retrieval_rows_per_day, p_rows_per_day) INTO cap
      FROM (SELECT 1) one
      LEFT JOIN org_memory_tenant_settings s ON s.tenant_id = p_tenant;
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
    IF EXISTS (
        SELECT 1 FROM org_memory_events
        WHERE tenant_id = p_tenant AND event_type = 'entry_redacted' AND recorded_at >= p_at
    ) OR EXISTS (
        SELECT 1 FROM jsonb_array_elements(p_hits) h
        JOIN org_memory_entries e
          ON e.tenant_id = p_tenant AND e.entry_id = (h->>'entry_id')::uuid
        WHERE e.status = 'redacted'
    ) OR grandbo_spells_redacted(p_tenant, spelled) THEN
        topic := '[redacted]';
        incident := NULL;
        spelled := 'redacted';
    END IF;
    INSERT INTO org_memory_retrievals
        (tenant_id, retrieval_id, at, caller, incident_id, topic, hits, latency_ms,
         no_precedent, scrubbed)
    VALUES (p_tenant, v_id, p_at, p_caller, incident, topic, p_hits, p_latency_ms,
            p_no_precedent, topic <> p_topic);
    INSERT INTO org_memory_retrieval_spellings
        (tenant_id, retrieval_id, spelled, served, full_rules)
    VALUES (p_tenant, v_id, spelled,
            ARRAY(SELECT (h->>'entry_id')::uuid FROM jsonb_array_elements(p_hits) h),
            p_spelled IS NOT NULL);
END
$$;
REVOKE ALL ON FUNCTION grandbo_log_retrieval(text, timestamptz, text, text, text, jsonb, double precision, boolean, integer, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION grandbo_log_retrieval(text, timestamptz, text, text, text, jsonb, double precision, boolean, integer, text) TO grandbo_app;

-- A writer of code older than this migration: the database spells (marked for the audit)
CREATE OR REPLACE FUNCTION grandbo_log_retrieval(
    p_tenant text, p_at timestamptz, p_caller text, p_incident text, p_topic text,
    p_hits jsonb, p_latency_ms double precision, p_no_precedent boolean,
    p_rows_per_day integer
) RETURNS void
LANGUAGE sql
VOLATILE
AS $$
    SELECT grandbo_log_retrieval(
        p_tenant, p_at, p_caller, p_incident, p_topic, p_hits, p_latency_ms, p_no_precedent,
        p_rows_per_day, NULL::text)
$$;

-- 3. A verdict's note quoting a redacted text: rewritten (the note alone, to
--    '[redacted]') by the redaction, or removed by an admin, through this one
--    owned path past the log's append-only trigger.
CREATE OR REPLACE FUNCTION org_memory_events_append_only() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE'
       AND current_setting('grandbo.purging', true) = OLD.tenant_id
       AND OLD.tenant_id = grandbo_current_tenant()
    THEN
        RETURN OLD;  -- the organization's purge (0020)
    END IF;
    IF TG_OP = 'UPDATE'
       AND current_setting('grandbo.redacting', true) = 'on'
       AND OLD.event_type <> 'entry_redacted'
       AND NEW.event_id = OLD.event_id AND NEW.tenant_id = OLD.tenant_id
       AND NEW.entry_id = OLD.entry_id AND NEW.event_type = OLD.event_type
       AND NEW.revision = OLD.revision AND NEW.recorded_at = OLD.recorded_at
       AND NEW.imported = OLD.imported
       AND NEW.actor = grandbo_redacted_actor(OLD.actor)
       AND NEW.idempotency_key LIKE 'redacted:' || OLD.entry_id || ':' || OLD.event_id || ':%'
       AND NEW.payload = grandbo_removed_payload(OLD.payload)
       AND EXISTS (
           SELECT 1 FROM org_memory_events r
           WHERE r.tenant_id = OLD.tenant_id AND r.entry_id = OLD.entry_id
             AND r.event_type = 'entry_redacted')
    THEN
        RETURN NEW;  -- the redaction of an entry whose redaction is recorded (0019, 0030)
    END IF;
    IF TG_OP = 'UPDATE'
       AND current_setting('grandbo.removing_notes', true) = OLD.tenant_id
       AND OLD.event_type = 'feedback_recorded'
       AND OLD.payload ? 'note'
       AND NEW.event_id = OLD.event_id AND NEW.tenant_id = OLD.tenant_id
       AND NEW.entry_id = OLD.entry_id AND NEW.event_type = OLD.event_type
       AND NEW.revision = OLD.revision AND NEW.recorded_at = OLD.recorded_at
       AND NEW.imported = OLD.imported AND NEW.actor = OLD.actor
       AND NEW.idempotency_key = OLD.idempotency_key
       AND NEW.payload = OLD.payload || '{"note": "[redacted]"}'::jsonb
    THEN
        RETURN NEW;  -- a note removed (0040)
    END IF;
    RAISE EXCEPTION 'org_memory_events is append-only: % is not allowed', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;

-- The verdicts' notes of the caller's scope rewritten to '[redacted]': the events given.
CREATE FUNCTION grandbo_remove_notes(p_tenant text, p_events bigint[]) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    n integer;
BEGIN
    IF p_tenant IS NULL OR p_tenant IS DISTINCT FROM grandbo_current_tenant() THEN
        RAISE EXCEPTION 'grandbo_remove_notes removes its own scope''s notes only'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    PERFORM set_config('grandbo.removing_notes', p_tenant, true);
    UPDATE org_memory_events
       SET payload = payload || '{"note": "[redacted]"}'::jsonb
     WHERE tenant_id = p_tenant AND event_id = ANY(p_events)
       AND event_type = 'feedback_recorded' AND payload ? 'note'
       AND payload->>'note' IS DISTINCT FROM '[redacted]';
    GET DIAGNOSTICS n = ROW_COUNT;
    PERFORM set_config('grandbo.removing_notes', '', true);
    RETURN n;
END
$$;
REVOKE ALL ON FUNCTION grandbo_remove_notes(text, bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION grandbo_remove_notes(text, bigint[]) TO grandbo_app;

-- An admin's removal of one note, recorded (who, when, why, the note's SHA-256)
CREATE TABLE org_memory_note_removals (
    tenant_id    text NOT NULL,
    event_id     bigint NOT NULL,
    note_sha256  text NOT NULL CHECK (note_sha256 ~ '^[0-9a-f]{64}$'),
    actor        text NOT NULL CHECK (length(actor) BETWEEN 1 AND 200),
    reason       text NOT NULL CHECK (length(reason) BETWEEN 1 AND 2000),
    removed_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (tenant_id, event_id)
);
ALTER TABLE org_memory_note_removals ENABLE ROW LEVEL SECURITY;
ALTER TABLE org_memory_note_removals FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON org_memory_note_removals
    USING (tenant_id = grandbo_current_tenant())
    WITH CHECK (tenant_id = grandbo_current_tenant());
GRANT SELECT, INSERT, DELETE ON org_memory_note_removals TO grandbo_app;

-- 4. A receipt per redaction: where the text and its spellings were searched, what was
--    found and removed, and that nothing was left (counts); when and by whom. Digests
--    only: the spellings' digests are org_memory_redacted_spellings' rows of the entry.
CREATE TABLE org_memory_redaction_receipts (
    tenant_id    text NOT NULL,
    entry_id     uuid NOT NULL,
    issued_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    actor        text NOT NULL CHECK (length(actor) BETWEEN 1 AND 200),
    spellings    integer NOT NULL CHECK (spellings >= 0),
    places       jsonb NOT NULL CHECK (jsonb_typeof(places) = 'array'),
    verified_at  timestamptz,
    verified_left integer,
    PRIMARY KEY (tenant_id, entry_id)
);
ALTER TABLE org_memory_redaction_receipts ENABLE ROW LEVEL SECURITY;
ALTER TABLE org_memory_redaction_receipts FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON org_memory_redaction_receipts
    USING (tenant_id = grandbo_current_tenant())
    WITH CHECK (tenant_id = grandbo_current_tenant());
GRANT SELECT, INSERT, UPDATE (verified_at, verified_left), DELETE
    ON org_memory_redaction_receipts TO grandbo_app;
