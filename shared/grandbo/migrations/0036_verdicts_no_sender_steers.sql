-- Issue 50, point 4: learning from outcomes that no sender can steer.
--
-- 1. An admin removes a verdict: an event of its own on the verdict's entry
--    (`feedback_removed`: who, when and why, the verdict it removes named by its key and
--    its verdict), never a change to the verdict's event (the log is append-only). The
--    projection's counts forget it (grandbo.memory.domain.projection folds it, `grandbo
--    rebuild --verify` checks it) and so does every later fit of the organization's
--    recalibration (grandbo.memory.domain.recalibration).
ALTER TABLE org_memory_events DROP CONSTRAINT org_memory_events_event_type_check;
ALTER TABLE org_memory_events ADD CONSTRAINT org_memory_events_event_type_check
    CHECK (event_type IN ('entry_created', 'entry_corrected', 'entry_retired',
                          'entry_superseded', 'feedback_recorded', 'entry_promoted',
                          'entry_merged', 'entry_split', 'merge_policy_set',
                          'entry_redacted', 'feedback_removed'));
-- the removal of a verdict, found by the verdict's key (a refit asks of each verdict it
-- reads; the incident page of each it lists)
CREATE INDEX org_memory_events_verdict_removals
    ON org_memory_events (tenant_id, (payload->>'verdict_key'))
    WHERE event_type = 'feedback_removed';

-- 2. An admin's reset of the recalibration starts a new epoch: every later fit ignores the
--    verdicts recorded before it (NULL: never reset). A constant default: no rewrite.
ALTER TABLE org_memory_tenant_settings ADD COLUMN recalibration_epoch timestamptz;
