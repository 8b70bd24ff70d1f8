-- Recurrences (issue 14): a new entry that says what an active entry already says is
-- merged into it instead of standing as a second entry. The merged entry keeps its text
-- and its events (status 'merged', `merged_into` the canonical entry); the canonical
-- entry's count, the incidents it was seen in and when it was last seen are derived from
-- the entries merged into it, so an admin's split (the merged entry active again) needs
-- no bookkeeping of its own. An admin may mark an entry never-merge (an event too).
ALTER TABLE org_memory_events DROP CONSTRAINT org_memory_events_event_type_check;
ALTER TABLE org_memory_events ADD CONSTRAINT org_memory_events_event_type_check
    CHECK (event_type IN ('entry_created', 'entry_corrected', 'entry_retired',
                          'entry_superseded', 'feedback_recorded', 'entry_promoted',
                          'entry_merged', 'entry_split', 'merge_policy_set'));

ALTER TABLE org_memory_entries DROP CONSTRAINT org_memory_entries_status_check;
ALTER TABLE org_memory_entries
    ADD CONSTRAINT org_memory_entries_status_check
        CHECK (status IN ('active', 'retired', 'superseded', 'merged')),
    ADD COLUMN merged_into uuid,
    ADD COLUMN never_merge boolean NOT NULL DEFAULT false,
    ADD COLUMN seen_count integer NOT NULL DEFAULT 1 CHECK (seen_count >= 1),
    ADD COLUMN last_seen_at timestamptz,
    ADD COLUMN seen_in_incidents text[] NOT NULL DEFAULT '{}',
    ADD CONSTRAINT org_memory_entries_merged_into
        CHECK ((status = 'merged') = (merged_into IS NOT NULL));
-- the entries merged into one (to derive its count, and to list them)
CREATE INDEX org_memory_entries_merged
    ON org_memory_entries (tenant_id, merged_into) WHERE merged_into IS NOT NULL;
