-- An organization's confidence floor: hits whose confidence is under it are withheld from
-- its answers (NULL: the embedding model's default, grandbo.memory.confidence.fitted).
-- Read with the calibrated cutoff in one statement, cached per query container.
ALTER TABLE org_memory_tenant_settings
    ADD COLUMN min_confidence double precision
        CHECK (min_confidence >= 0 AND min_confidence <= 1);
-- The organization's own recalibration of the confidence model, fit from its verdicts
-- (grandbo.memory.confidence.recalibration): confidence' = sigmoid(scale * logit(c) +
-- shift), NULL until it has enough verdicts carrying the confidence they were served with.
-- It applies to the confidence model it was fit for (`confidence_model`) only.
ALTER TABLE org_memory_tenant_settings
    ADD COLUMN confidence_scale double precision CHECK (confidence_scale > 0),
    ADD COLUMN confidence_shift double precision,
    ADD COLUMN confidence_verdicts integer CHECK (confidence_verdicts >= 0),
    ADD COLUMN confidence_model text;
-- The verdicts a refit reads (the organization's latest that carry a served confidence):
-- a partial index, so a refit reads its own few rows, never every feedback event.
CREATE INDEX org_memory_events_served_verdicts
    ON org_memory_events (tenant_id, recorded_at DESC, event_id DESC)
    WHERE event_type = 'feedback_recorded' AND jsonb_typeof(payload->'confidence') = 'number';
