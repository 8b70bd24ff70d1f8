-- Feedback is rate-limited per caller (issue 24): each verdict counts its caller's verdicts
-- of the last minutes, by this partial index of the feedback events only.
CREATE INDEX org_memory_events_feedback_by_actor
    ON org_memory_events (tenant_id, actor, recorded_at)
    WHERE event_type = 'feedback_recorded';
