-- Issue 50, point 3: a confidence model fitted from the organization's own lake, per
-- tenant and embedding revision (`grandbo.memory.lifecycle.confidence_fit`: `grandbo
-- calibrate`, the hourly index job in AWS). Served where the embedding model has no fit
-- measured on labelled data (Titan, a test double); replaced by the next fit. Not memory:
-- a measurement (not in the event log), like a calibrated cutoff (0013).
CREATE TABLE org_memory_confidence_fits (
    tenant_id   text        NOT NULL,
    embed_rev   text        NOT NULL,
    model       jsonb       NOT NULL,  -- name, intercept, weights, default_floor, ranks
    questions   integer     NOT NULL CHECK (questions > 0),
    details     jsonb       NOT NULL,  -- the measure half's figures, beside the shipped model's
    fitted_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, embed_rev)
);
ALTER TABLE org_memory_confidence_fits ENABLE ROW LEVEL SECURITY;
ALTER TABLE org_memory_confidence_fits FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON org_memory_confidence_fits
    USING (tenant_id = grandbo_current_tenant()) WITH CHECK (tenant_id = grandbo_current_tenant());
GRANT SELECT, INSERT, UPDATE, DELETE ON org_memory_confidence_fits TO grandbo_app;
