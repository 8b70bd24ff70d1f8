-- An organization's confidence floor: hits whose confidence is under it are withheld from
-- its answers (NULL: the embedding model's default, grandbo.memory.confidence.fitted).
-- Read with the calibrated cutoff in one statement, cached per query container.
ALTER TABLE org_memory_tenant_settings
    ADD COLUMN min_confidence double precision
        CHECK (min_confidence >= 0 AND min_confidence <= 1);
-- The organization's own recalibration of the confidence model, fit from its verdicts
-- (grandbo.memory.confidence.recalibration): confidence' = sigmoid(scale * logit(c) +
-- shift), NULL until it has enough verdicts carrying the confidence they were served with.
ALTER TABLE org_memory_tenant_settings
    ADD COLUMN confidence_scale double precision CHECK (confidence_scale > 0),
    ADD COLUMN confidence_shift double precision,
    ADD COLUMN confidence_verdicts integer CHECK (confidence_verdicts >= 0);
