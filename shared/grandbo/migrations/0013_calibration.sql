-- Vector cutoffs measured on an organization's own lake (issue 13): per tenant and
-- embedding revision, derived without labels (`grandbo calibrate`, the signed
-- POST /v1/admin/calibration); a query uses it instead of the provider's default.
-- Not memory: a measurement, replaced by the next one (not in the event log).
CREATE TABLE org_memory_calibrations (
    tenant_id     text             NOT NULL,
    embed_rev     text             NOT NULL,
    vector_cutoff double precision NOT NULL CHECK (vector_cutoff > 0 AND vector_cutoff <= 2),
    sample_size   integer          NOT NULL CHECK (sample_size > 0),
    details       jsonb            NOT NULL,
    measured_at   timestamptz      NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, embed_rev)
);
ALTER TABLE org_memory_calibrations ENABLE ROW LEVEL SECURITY;
ALTER TABLE org_memory_calibrations FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON org_memory_calibrations
    USING (tenant_id = grandbo_current_tenant()) WITH CHECK (tenant_id = grandbo_current_tenant());
GRANT SELECT, INSERT, UPDATE ON org_memory_calibrations TO grandbo_app;
