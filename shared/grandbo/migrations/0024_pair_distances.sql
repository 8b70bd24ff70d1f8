-- Issue 28: the distances a query's collapse reads (Consolidation.collapse: the pairs of
-- candidates whose words already agree) in one statement that scopes itself, as
-- grandbo_search does, where they took a transaction of their own (BEGIN, the tenant's
-- set_config, the statement, COMMIT: four round trips, the statement planned on each).
-- Same rows as RecurrenceReads.distances_between's statement, which it replaces; runs as
-- the caller (row-level security applies), states tenant_id, and sets the tenant for its
-- own transaction only; another tenant's scope is refused. Its plan is generic and kept
-- per backend (the ids are an array, the tenant a parameter: a key probe either way).
CREATE FUNCTION grandbo_pair_distances(p_tenant text, p_ids uuid[], p_rev text)
RETURNS TABLE (a uuid, b uuid, d float8)
LANGUAGE plpgsql
SET search_path = public, pg_temp
SET plan_cache_mode = force_generic_plan
AS $fn$
BEGIN
    IF p_tenant IS NULL OR p_tenant = '' THEN
        RAISE EXCEPTION 'grandbo_pair_distances needs a tenant'
            USING ERRCODE = 'insufficient_privilege';
    ELSIF grandbo_current_tenant() IS NULL THEN
        PERFORM set_config('grandbo.tenant_id', p_tenant, true);
    ELSIF grandbo_current_tenant() IS DISTINCT FROM p_tenant THEN
        RAISE EXCEPTION 'grandbo_pair_distances outside its tenant''s scope'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN QUERY
    WITH v AS (
        SELECT e.entry_id, e.embedding FROM org_memory_entries e
        WHERE e.tenant_id = p_tenant AND e.entry_id = ANY(p_ids) AND e.embed_rev = p_rev
    )
    SELECT x.entry_id, y.entry_id, (x.embedding <=> y.embedding)::float8
    FROM v x JOIN v y ON x.entry_id < y.entry_id;
END
$fn$;
REVOKE ALL ON FUNCTION grandbo_pair_distances(text, uuid[], text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION grandbo_pair_distances(text, uuid[], text) TO grandbo_app;
