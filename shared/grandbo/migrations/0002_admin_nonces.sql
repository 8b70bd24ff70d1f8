-- Nonces of signed admin requests, so a captured request cannot be replayed within its
-- five-minute window. Rows older than the window are pruned by the write path.

CREATE TABLE admin_request_nonces (
    tenant_id text        NOT NULL CHECK (tenant_id <> ''),
    key_id    text        NOT NULL,
    nonce     text        NOT NULL,
    seen_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (tenant_id, key_id, nonce)
);
CREATE INDEX admin_request_nonces_seen ON admin_request_nonces (tenant_id, seen_at);

ALTER TABLE admin_request_nonces ENABLE ROW LEVEL SECURITY;
ALTER TABLE admin_request_nonces FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON admin_request_nonces
    USING (tenant_id = grandbo_current_tenant())
    WITH CHECK (tenant_id = grandbo_current_tenant());

GRANT SELECT, INSERT, DELETE ON admin_request_nonces TO grandbo_app;
