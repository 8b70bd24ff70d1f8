-- Issue 34, point 6: an incident's id goes with the text, wherever it is stored. A
-- redaction removed the entry's `incident_id` (the platform's ids can carry words, and
-- the learned graph re-keys the incident's node so no one finds it by hashing a guessed
-- id), but the id stayed readable in the redacted entry's events: in the actor
-- (`incident-closed:ID`), in the finding's idempotency key (`incident:ID:finding:F`) and
-- in verdicts' keys (`query:CALLER:feedback:ENTRY:INCIDENT`), shown by export and history.
--
-- One policy: under redaction an event of the entry keeps no caller-made string. Its key
-- becomes `redacted:ENTRY_ID:EVENT_ID:NONCE` (unique, names nothing the caller sent, and
-- no key planted beforehand can be it: the nonce is the redaction's, random), an incident pipeline's actor
-- becomes `incident-closed:[redacted]` (the pipeline wrote it; which incident is gone),
-- as its payload becomes {"redacted": true, "sha256": ...}. The `entry_redacted` events
-- keep theirs: a retry of the redaction finds its tombstone by its key.
--
-- What the finding's key did, deduplicate a redelivery of the incident (an archive
-- replay, a DLQ redrive), the removed text's digest does now: a redaction keeps the
-- SHA-256 of every text it removed in its `entry_redacted` event (`text_sha256`,
-- grandbo.memory.redacted_text: a digest of the text, never of a guessable id), and a
-- creation of such a text again writes nothing; for tombstones made before, a creation
-- whose whole payload hashes to a removed one (0019's digest). The repository looks both
-- up in the partial indexes below, which hold redactions and removed payloads only.
CREATE INDEX org_memory_events_removed_payloads
    ON org_memory_events (tenant_id, (payload->>'sha256'))
    WHERE payload ? 'redacted';
CREATE INDEX org_memory_events_redactions
    ON org_memory_events (tenant_id)
    WHERE event_type = 'entry_redacted';

CREATE FUNCTION grandbo_redacted_actor(p_actor text) RETURNS text
    LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_actor LIKE 'incident-closed:%' THEN 'incident-closed:[redacted]'
                ELSE p_actor END
$$;

-- A payload as a redaction leaves it: removed (0019), once
CREATE FUNCTION grandbo_removed_payload(p_payload jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_payload ? 'redacted' THEN p_payload
                ELSE jsonb_build_object(
                    'redacted', true,
                    'sha256', encode(sha256(convert_to(p_payload::text, 'UTF8')), 'hex')) END
$$;

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
    RAISE EXCEPTION 'org_memory_events is append-only: % is not allowed', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;

CREATE OR REPLACE FUNCTION grandbo_redact_events(
    p_tenant text, p_entries uuid[], p_revisions integer[], p_payloads jsonb[],
    p_actor text, p_keys text[]
) RETURNS TABLE (entry_id uuid, event_id bigint, event_type text, sha256 text)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    -- in every key this redaction leaves: a key planted beforehand cannot take one
    v_nonce text := replace(gen_random_uuid()::text, '-', '');
BEGIN
    IF p_tenant IS DISTINCT FROM grandbo_current_tenant() THEN
        RAISE EXCEPTION 'redaction of another tenant' USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF coalesce(array_length(p_entries, 1), 0) = 0
       OR array_length(p_revisions, 1) IS DISTINCT FROM array_length(p_entries, 1)
       OR array_length(p_payloads, 1) IS DISTINCT FROM array_length(p_entries, 1)
       OR array_length(p_keys, 1) IS DISTINCT FROM array_length(p_entries, 1) THEN
        RAISE EXCEPTION 'one revision, payload and key per entry' USING ERRCODE = 'data_exception';
    END IF;
    IF (SELECT count(*) FROM org_memory_entries t
         WHERE t.tenant_id = p_tenant AND t.entry_id = ANY(p_entries) AND t.status = 'redacted'
           AND t.title = '[redacted]' AND t.summary = '[redacted]' AND t.tags = '{}')
       <> (SELECT count(DISTINCT x) FROM unnest(p_entries) AS x)
       OR (SELECT count(DISTINCT x) FROM unnest(p_entries) AS x) <> array_length(p_entries, 1)
    THEN
        RAISE EXCEPTION 'every entry must already be a tombstone in the projection'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    PERFORM set_config('grandbo.redacting', 'on', true);
    FOR i IN 1 .. coalesce(array_length(p_entries, 1), 0) LOOP
        INSERT INTO org_memory_events (tenant_id, entry_id, event_type, revision, payload,
                                       actor, idempotency_key)
        VALUES (p_tenant, p_entries[i], 'entry_redacted', p_revisions[i], p_payloads[i],
                p_actor, p_keys[i]);
    END LOOP;
    RETURN QUERY
    UPDATE org_memory_events e
       SET payload = grandbo_removed_payload(e.payload),
           actor = grandbo_redacted_actor(e.actor),
           idempotency_key = 'redacted:' || e.entry_id || ':' || e.event_id || ':' || v_nonce
     WHERE e.tenant_id = p_tenant AND e.entry_id = ANY(p_entries)
       AND e.event_type <> 'entry_redacted'
       AND e.idempotency_key NOT LIKE 'redacted:%'
    RETURNING e.entry_id, e.event_id, e.event_type, e.payload->>'sha256';
    PERFORM set_config('grandbo.redacting', 'off', true);
END
$$;

-- The entries redacted before: their events keep no caller-made string either (as the
-- owner, row-level security lifted for the statement, as in 0006).
ALTER TABLE org_memory_events NO FORCE ROW LEVEL SECURITY;
SELECT set_config('grandbo.redacting', 'on', true);
UPDATE org_memory_events e
   SET actor = grandbo_redacted_actor(e.actor),
       idempotency_key = 'redacted:' || e.entry_id || ':' || e.event_id || ':'
           || replace(gen_random_uuid()::text, '-', '')
 WHERE e.event_type <> 'entry_redacted'
   AND e.payload ? 'redacted'
   AND e.idempotency_key NOT LIKE 'redacted:%'
   AND EXISTS (
       SELECT 1 FROM org_memory_events r
       WHERE r.tenant_id = e.tenant_id AND r.entry_id = e.entry_id
         AND r.event_type = 'entry_redacted');
SELECT set_config('grandbo.redacting', 'off', true);
ALTER TABLE org_memory_events FORCE ROW LEVEL SECURITY;
