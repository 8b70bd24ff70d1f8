-- Issue 43, point 3: no caller and no import steers the confidence.
--
-- An event an import wrote (a lake stream, grandbo.memory.repository.lake) is marked: it
-- keeps its original actor, key and time, so nothing else in it says it arrived by
-- import. An imported verdict is history (counted, shown, exported), never what the
-- organization's recalibration is fit from (grandbo.memory.confidence.recalibration).
-- Every event written before this migration was written by the write path or by an
-- import of an earlier version, which cannot be told apart now: they stay `false`.
-- A constant default: no table rewrite.
ALTER TABLE org_memory_events ADD COLUMN imported boolean NOT NULL DEFAULT false;

-- The verdicts a refit reads: the organization's latest ones not imported. Their
-- confidence is the one the retrieval log holds for the hit (0032's index by incident),
-- no longer the one a verdict carries (0026's index of those, dropped: nothing reads it).
DROP INDEX org_memory_events_served_verdicts;
CREATE INDEX org_memory_events_fit_verdicts
    ON org_memory_events (tenant_id, recorded_at DESC, event_id DESC)
    WHERE event_type = 'feedback_recorded' AND NOT imported;

-- A redaction's rewrite (0019, 0030) leaves the mark as it was, as every other column
-- but the payload, actor and key it rewrites.
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
    RAISE EXCEPTION 'org_memory_events is append-only: % is not allowed', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;

-- The recalibrations fit before this were fit from the confidence callers stated, from
-- any one caller's verdicts, within bounds that let a map flatten the model: none is
-- kept. The next verdict refits one from the verdicts the retrieval log ties, where the
-- organization has enough (as the owner, row-level security lifted for the statement,
-- as in 0030).
ALTER TABLE org_memory_tenant_settings NO FORCE ROW LEVEL SECURITY;
UPDATE org_memory_tenant_settings
   SET confidence_scale = NULL, confidence_shift = NULL, confidence_verdicts = NULL,
       confidence_model = NULL
 WHERE confidence_scale IS NOT NULL;
ALTER TABLE org_memory_tenant_settings FORCE ROW LEVEL SECURITY;
