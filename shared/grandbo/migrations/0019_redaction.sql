-- Redaction (issue 25): the one owned, audited path that rewrites stored event payloads.
--
-- The event log stays append-only for every role, the owner included, except for one
-- exact change: an event's payload replaced by {"redacted": true, "sha256": <hex of the
-- removed payload>}, for an entry whose `entry_redacted` event is recorded, in a
-- transaction that set grandbo.redacting. `grandbo_redact_events` (owned by the schema
-- owner, SECURITY DEFINER, executable by the application role) is that path: it records
-- the redaction event and rewrites the entry's other events, in the caller's transaction,
-- under the caller's tenant (row-level security stays forced on the owner). The
-- projection, postings, statistics and vectors are the repository's to clear, in the
-- same transaction.
ALTER TABLE org_memory_events DROP CONSTRAINT org_memory_events_event_type_check;
ALTER TABLE org_memory_events ADD CONSTRAINT org_memory_events_event_type_check
    CHECK (event_type IN ('entry_created', 'entry_corrected', 'entry_retired',
                          'entry_superseded', 'feedback_recorded', 'entry_promoted',
                          'entry_merged', 'entry_split', 'merge_policy_set',
                          'entry_redacted'));

ALTER TABLE org_memory_entries DROP CONSTRAINT org_memory_entries_status_check;
ALTER TABLE org_memory_entries ADD CONSTRAINT org_memory_entries_status_check
    CHECK (status IN ('active', 'retired', 'superseded', 'merged', 'redacted'));

CREATE OR REPLACE FUNCTION org_memory_events_append_only() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
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
        RETURN NEW;  -- the redaction of an entry whose redaction is recorded
    END IF;
    RAISE EXCEPTION 'org_memory_events is append-only: % is not allowed', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;

-- Records `entry_redacted` on each of `p_entries` (the first is the entry asked for, the
-- others its recurrences redacted with it) and replaces every other event payload of
-- theirs by its hash; returns each rewritten event with the hash of what it held.
CREATE FUNCTION grandbo_redact_events(
    p_tenant text, p_entries uuid[], p_revisions integer[], p_payloads jsonb[],
    p_actor text, p_keys text[]
) RETURNS TABLE (entry_id uuid, event_id bigint, event_type text, sha256 text)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
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
    -- history is rewritten only under a projection already made a tombstone, in this
    -- transaction, of every entry named: never an entry whose text is still served
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
       SET payload = jsonb_build_object(
               'redacted', true,
               'sha256', encode(sha256(convert_to(e.payload::text, 'UTF8')), 'hex'))
     WHERE e.tenant_id = p_tenant AND e.entry_id = ANY(p_entries)
       AND e.event_type <> 'entry_redacted'
       AND NOT (e.payload ? 'redacted')
    RETURNING e.entry_id, e.event_id, e.event_type, e.payload->>'sha256';
    PERFORM set_config('grandbo.redacting', 'off', true);
END
$$;
REVOKE ALL ON FUNCTION grandbo_redact_events(text, uuid[], integer[], jsonb[], text, text[])
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION grandbo_redact_events(text, uuid[], integer[], jsonb[], text, text[])
    TO grandbo_app;
