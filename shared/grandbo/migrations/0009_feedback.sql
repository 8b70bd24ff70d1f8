-- Feedback (issue 14): after an investigation, Beacon says whether an entry helped. Each
-- verdict is an event like any other (so a rebuild replays it), counted on the entry.
ALTER TABLE org_memory_events DROP CONSTRAINT org_memory_events_event_type_check;
ALTER TABLE org_memory_events ADD CONSTRAINT org_memory_events_event_type_check
    CHECK (event_type IN ('entry_created', 'entry_corrected', 'entry_retired',
                          'entry_superseded', 'feedback_recorded'));

ALTER TABLE org_memory_entries
    ADD COLUMN helpful_count     integer NOT NULL DEFAULT 0 CHECK (helpful_count >= 0),
    ADD COLUMN not_helpful_count integer NOT NULL DEFAULT 0 CHECK (not_helpful_count >= 0),
    ADD COLUMN misleading_count  integer NOT NULL DEFAULT 0 CHECK (misleading_count >= 0);
