-- Issue 36, point 3: the retrieval log. Every query_org_memory of an organization, as it
-- was asked and answered: when, which caller (a key, or a person), the caller's incident,
-- the topic, the hits (ids, ranks and confidences only: never an entry's text, so a
-- redaction needs no second pass here) and the latency. Kept for the organization's
-- retention (RETRIEVAL_DAYS, 30), forgotten by the sweeper past it, and emptied by a purge
-- (grandbo_purge_tenant reads every table with a tenant_id: 0020).
CREATE TABLE org_memory_retrievals (
    tenant_id     text NOT NULL,
    retrieval_id  uuid NOT NULL DEFAULT gen_random_uuid(),
    at            timestamptz NOT NULL DEFAULT now(),
    caller        text NOT NULL CHECK (length(caller) BETWEEN 1 AND 200),
    incident_id   text CHECK (length(incident_id) BETWEEN 1 AND 200),
    topic         text NOT NULL CHECK (length(topic) BETWEEN 1 AND 8000),
    -- [{"entry_id": uuid, "rank": 1.., "confidence": 0..1 | null}], best first
    hits          jsonb NOT NULL CHECK (jsonb_typeof(hits) = 'array'),
    latency_ms    double precision NOT NULL CHECK (latency_ms >= 0),
    no_precedent  boolean NOT NULL,
    PRIMARY KEY (tenant_id, retrieval_id)
);
CREATE INDEX org_memory_retrievals_newest ON org_memory_retrievals (tenant_id, at DESC);
CREATE INDEX org_memory_retrievals_by_incident
    ON org_memory_retrievals (tenant_id, incident_id, at DESC) WHERE incident_id IS NOT NULL;

ALTER TABLE org_memory_retrievals ENABLE ROW LEVEL SECURITY;
ALTER TABLE org_memory_retrievals FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON org_memory_retrievals
    USING (tenant_id = grandbo_current_tenant())
    WITH CHECK (tenant_id = grandbo_current_tenant());
GRANT SELECT, INSERT, DELETE ON org_memory_retrievals TO grandbo_app;

-- One retrieval written in one statement, scoped to its tenant inside the server (no BEGIN,
-- no set_config from the client: nothing that pins an RDS Proxy connection, 0031).
-- `p_at`: when it was asked (the query's own clock), so the log's order is the questions'
-- even when the writer sends many in one round trip (one implicit transaction: one now()).
CREATE FUNCTION grandbo_log_retrieval(
    p_tenant text, p_at timestamptz, p_caller text, p_incident text, p_topic text,
    p_hits jsonb, p_latency_ms double precision, p_no_precedent boolean
) RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
BEGIN
    PERFORM set_config('grandbo.tenant_id', p_tenant, true);
    -- a writer of the organization (the tenant's shared lock, as grandbo_scope takes it):
    -- a purge, under the exclusive one, never runs beside it
    PERFORM pg_advisory_xact_lock_shared(hashtextextended('grandbo.tenant:' || p_tenant, 0));
    -- the sweeper visits every tenant of this registry to forget expired retrievals, an
    -- organization that only ever queried included
    INSERT INTO org_memory_tenants (tenant_id) VALUES (p_tenant) ON CONFLICT DO NOTHING;
    INSERT INTO org_memory_retrievals
        (tenant_id, at, caller, incident_id, topic, hits, latency_ms, no_precedent)
    VALUES (p_tenant, p_at, p_caller, p_incident, p_topic, p_hits, p_latency_ms, p_no_precedent);
END
$$;
REVOKE ALL ON FUNCTION grandbo_log_retrieval(text, timestamptz, text, text, text, jsonb, double precision, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION grandbo_log_retrieval(text, timestamptz, text, text, text, jsonb, double precision, boolean) TO grandbo_app;

-- How long the organization keeps its retrievals (NULL: RETRIEVAL_DAYS, 30).
ALTER TABLE org_memory_tenant_settings
    ADD COLUMN retrieval_days integer CHECK (retrieval_days BETWEEN 1 AND 3650);
