-- Issue 50, point 3 (a review): a fit that was measured and not kept is recorded too, so
-- the hourly job does not measure the same organization again at every run ahead of the
-- others (it was due again at once: nothing stored). `attempted_at`: the last fit made,
-- kept or not; `model` NULL: none was ever kept (the shipped model serves). A kept model
-- stays until a later fit is kept.
ALTER TABLE org_memory_confidence_fits ALTER COLUMN model DROP NOT NULL;
ALTER TABLE org_memory_confidence_fits ADD COLUMN attempted_at timestamptz;
ALTER TABLE org_memory_confidence_fits DROP CONSTRAINT org_memory_confidence_fits_questions_check;
ALTER TABLE org_memory_confidence_fits
    ADD CONSTRAINT org_memory_confidence_fits_questions_check CHECK (questions >= 0);
