-- Episodic and durable memory (issue 14). A durable entry is a corroborated root cause
-- or a mitigation that worked; an episodic one (a transient observation) expires
-- `ttl_days` after it was recorded, and the sweeper retires it through an event. Both the
-- kind and the lifetime are in the created event's payload, so a replay reproduces
-- `expires_at`; promoting an entry to durable is an event too.
ALTER TABLE org_memory_events DROP CONSTRAINT org_memory_events_event_type_check;
ALTER TABLE org_memory_events ADD CONSTRAINT org_memory_events_event_type_check
    CHECK (event_type IN ('entry_created', 'entry_corrected', 'entry_retired',
                          'entry_superseded', 'feedback_recorded', 'entry_promoted'));

ALTER TABLE org_memory_entries
    ADD COLUMN kind text NOT NULL DEFAULT 'durable' CHECK (kind IN ('durable', 'episodic')),
    ADD COLUMN expires_at timestamptz,
    ADD CONSTRAINT org_memory_entries_episodic_expires
        CHECK ((kind = 'episodic') = (expires_at IS NOT NULL));
CREATE INDEX org_memory_entries_expiring
    ON org_memory_entries (tenant_id, expires_at) WHERE status = 'active' AND kind = 'episodic';

-- Per-organization settings an admin may change (not memory: not in the event log).
CREATE TABLE org_memory_tenant_settings (
    tenant_id text PRIMARY KEY,
    episodic_ttl_days integer NOT NULL CHECK (episodic_ttl_days BETWEEN 1 AND 3650)
);
ALTER TABLE org_memory_tenant_settings ENABLE ROW LEVEL SECURITY;
ALTER TABLE org_memory_tenant_settings FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON org_memory_tenant_settings
    USING (tenant_id = grandbo_current_tenant()) WITH CHECK (tenant_id = grandbo_current_tenant());
GRANT SELECT, INSERT, UPDATE ON org_memory_tenant_settings TO grandbo_app;
