-- Knowledge-graph tier: bi-temporal topology nodes and edges, per tenant, never deleted.
-- A row is one validity interval: re-discovery of a current row reinforces it
-- (last_seen, observed_count); a snapshot sync closes rows absent from it (invalid_at);
-- rediscovering a closed node opens a new row, so as-of queries keep the older topology.

CREATE TABLE topology_nodes (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id      text        NOT NULL CHECK (tenant_id <> ''),
    node_key       text        NOT NULL,              -- tenant::type::external_id
    node_type      text        NOT NULL CHECK (node_type IN ('Service', 'Repo', 'Team', 'Person',
                                   'PagerDutyService', 'AwsResource', 'Incident')),
    external_id    text        NOT NULL CHECK (external_id <> ''),
    namespace      text        NOT NULL CHECK (namespace IN ('topology', 'learned')),
    name           text,
    properties     jsonb       NOT NULL DEFAULT '{}'::jsonb,
    valid_at       timestamptz NOT NULL,
    invalid_at     timestamptz,
    first_seen     timestamptz NOT NULL,
    last_seen      timestamptz NOT NULL,
    observed_count integer     NOT NULL DEFAULT 1 CHECK (observed_count >= 1),
    CHECK (node_key = tenant_id || '::' || node_type || '::' || external_id),
    CHECK (invalid_at IS NULL OR invalid_at >= valid_at)
);
CREATE UNIQUE INDEX topology_nodes_current ON topology_nodes (tenant_id, node_key)
    WHERE invalid_at IS NULL;
CREATE INDEX topology_nodes_history ON topology_nodes (tenant_id, node_key, valid_at);

CREATE TABLE topology_edges (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id      text        NOT NULL CHECK (tenant_id <> ''),
    source_key     text        NOT NULL,
    edge_type      text        NOT NULL CHECK (edge_type IN ('DEPENDS_ON', 'OWNED_BY', 'AFFECTS',
                                   'CORRELATES_WITH')),
    target_key     text        NOT NULL,
    namespace      text        NOT NULL CHECK (namespace IN ('topology', 'learned')),
    properties     jsonb       NOT NULL DEFAULT '{}'::jsonb,
    valid_at       timestamptz NOT NULL,
    invalid_at     timestamptz,
    first_seen     timestamptz NOT NULL,
    last_seen      timestamptz NOT NULL,
    observed_count integer     NOT NULL DEFAULT 1 CHECK (observed_count >= 1),
    CHECK (source_key <> target_key),
    CHECK (invalid_at IS NULL OR invalid_at >= valid_at)
);
CREATE UNIQUE INDEX topology_edges_current
    ON topology_edges (tenant_id, namespace, source_key, edge_type, target_key)
    WHERE invalid_at IS NULL;
-- Reverse traversal (who depends on X) and forward traversal (what X depends on).
CREATE INDEX topology_edges_into ON topology_edges (tenant_id, target_key, edge_type)
    INCLUDE (source_key, valid_at, invalid_at);
CREATE INDEX topology_edges_out ON topology_edges (tenant_id, source_key, edge_type)
    INCLUDE (target_key, valid_at, invalid_at);

-- Nothing is ever deleted: history is the point.
CREATE FUNCTION topology_no_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% rows are never deleted; invalidate them (invalid_at)', TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER topology_nodes_no_delete BEFORE DELETE ON topology_nodes
    FOR EACH ROW EXECUTE FUNCTION topology_no_delete();
CREATE TRIGGER topology_edges_no_delete BEFORE DELETE ON topology_edges
    FOR EACH ROW EXECUTE FUNCTION topology_no_delete();

ALTER TABLE topology_nodes ENABLE ROW LEVEL SECURITY;
ALTER TABLE topology_nodes FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON topology_nodes
    USING (tenant_id = grandbo_current_tenant()) WITH CHECK (tenant_id = grandbo_current_tenant());
ALTER TABLE topology_edges ENABLE ROW LEVEL SECURITY;
ALTER TABLE topology_edges FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON topology_edges
    USING (tenant_id = grandbo_current_tenant()) WITH CHECK (tenant_id = grandbo_current_tenant());

GRANT SELECT, INSERT, UPDATE ON topology_nodes, topology_edges TO grandbo_app;
