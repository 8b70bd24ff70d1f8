-- Issue 33: what a query's staleness check reads from the topology (LearnedGraph.service_changes:
-- its hits' services' node history, their DEPENDS_ON edges, those edges' targets' history,
-- and the service nodes that could succeed any of them) in one statement that scopes itself,
-- as grandbo_search does, where it took two to four transactions of its own (BEGIN, the
-- tenant's set_config, the read, COMMIT each). A superset of what the statements read: the
-- judgement stays in Python (grandbo.topology.learned.prefetch answers each of the
-- statements' questions from these rows, in their order: `ord`), and a test holds the two
-- paths' answers equal. Runs as the caller (row-level security applies), states tenant_id,
-- sets the tenant for its own transaction only; another tenant's scope is refused.
-- The Service key of a node key's external id ("t::AwsResource::orders-db" ->
-- "t::Service::orders-db"): everything after the key's second '::', as
-- grandbo.topology.learned.graph._external reads it.
CREATE FUNCTION grandbo_service_key(p_tenant text, p_key text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT p_tenant || '::Service::' || substr(p_key,
        length(split_part(p_key, '::', 1)) + length(split_part(p_key, '::', 2)) + 5)
$fn$;
REVOKE ALL ON FUNCTION grandbo_service_key(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION grandbo_service_key(text, text) TO grandbo_app;

CREATE FUNCTION grandbo_staleness_rows(p_tenant text, p_keys text[], p_until timestamptz)
RETURNS TABLE (
    part text,
    ord bigint,
    node_key text,
    external_id text,
    valid_at timestamptz,
    invalid_at timestamptz,
    properties jsonb,
    first_seen timestamptz,
    source_key text,
    target_key text
)
LANGUAGE plpgsql
SET search_path = public, pg_temp
SET plan_cache_mode = force_generic_plan
SET lock_timeout = '10s'
AS $fn$
BEGIN
    IF p_tenant IS NULL OR p_tenant = '' THEN
        RAISE EXCEPTION 'grandbo_staleness_rows needs a tenant'
            USING ERRCODE = 'insufficient_privilege';
    ELSIF grandbo_current_tenant() IS NULL THEN
        PERFORM set_config('grandbo.tenant_id', p_tenant, true);
    ELSIF grandbo_current_tenant() IS DISTINCT FROM p_tenant THEN
        RAISE EXCEPTION 'grandbo_staleness_rows outside its tenant''s scope'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN QUERY
    WITH edges AS (
        -- LearnedGraphRepository.dependency_history
        SELECT e.source_key, e.target_key, e.valid_at, e.invalid_at FROM topology_edges e
        WHERE e.tenant_id = p_tenant AND e.edge_type = 'DEPENDS_ON'
          AND e.source_key = ANY(p_keys)
          AND (p_until IS NULL OR e.valid_at <= p_until)
    ), nodes AS (
        -- LearnedGraphRepository.node_history, of the services and of their dependencies;
        -- a gone dependency is judged as the Service of its external id (whatever its own
        -- type: LearnedGraph.service_changes asks so), so that key is read too
        SELECT n.node_key, n.external_id, n.valid_at, n.invalid_at, n.properties, n.first_seen
        FROM topology_nodes n
        WHERE n.tenant_id = p_tenant
          AND n.node_key = ANY(p_keys
              || ARRAY(SELECT DISTINCT x.target_key FROM edges x)
              || ARRAY(SELECT DISTINCT grandbo_service_key(p_tenant, x.target_key) FROM edges x))
          AND (p_until IS NULL OR n.valid_at <= p_until)
    ), successors AS (
        -- LearnedGraphRepository.successors, of any of those nodes
        SELECT n.node_key, n.external_id, n.valid_at, n.invalid_at, n.properties, n.first_seen
        FROM topology_nodes n
        WHERE n.tenant_id = p_tenant AND n.node_type = 'Service'
          AND (CASE WHEN p_until IS NULL THEN n.invalid_at IS NULL
               ELSE n.valid_at <= p_until AND (n.invalid_at IS NULL OR n.invalid_at > p_until) END)
          AND (n.properties->>'replaces' IN (SELECT y.external_id FROM nodes y)
               OR (n.properties->>'owner', n.properties->>'repo') IN
                  (SELECT y.properties->>'owner', y.properties->>'repo' FROM nodes y))
    )
    SELECT 'edge', row_number() OVER (ORDER BY e.source_key, e.target_key, e.valid_at),
           NULL, NULL, e.valid_at, e.invalid_at, NULL, NULL, e.source_key, e.target_key
    FROM edges e
    UNION ALL
    SELECT 'node', row_number() OVER (ORDER BY n.node_key, n.valid_at),
           n.node_key, n.external_id, n.valid_at, n.invalid_at, n.properties, n.first_seen,
           NULL, NULL
    FROM nodes n
    UNION ALL
    SELECT 'successor', row_number() OVER (ORDER BY s.external_id),
           s.node_key, s.external_id, s.valid_at, s.invalid_at, s.properties, s.first_seen,
           NULL, NULL
    FROM successors s;
END
$fn$;
REVOKE ALL ON FUNCTION grandbo_staleness_rows(text, text[], timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION grandbo_staleness_rows(text, text[], timestamptz) TO grandbo_app;
