-- An organization's confidence floor: hits whose confidence is under it are withheld from
-- its answers (NULL: the embedding model's default, grandbo.memory.confidence.fitted).
-- Read with the calibrated cutoff in one statement, cached per query container.
ALTER TABLE org_memory_tenant_settings
    ADD COLUMN min_confidence double precision
        CHECK (min_confidence >= 0 AND min_confidence <= 1);
