-- Issue 35, point 4: nothing a request sends pins its RDS Proxy connection, and no
-- statement of the application role outlives the function that sent it.
--
-- 1. A tenant transaction's settings (`grandbo.tenant_id`, which row-level security reads,
--    and its bounded waits) and its tenant lock, taken by one server-side call. They were
--    sent as `SELECT set_config(..., true), pg_advisory_xact_lock...(...)`; RDS Proxy pins a
--    client connection to its backend on a set_config it sees, whether or not the setting
--    is transaction-local (https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/rds-proxy-pinning.html),
--    and a Lambda's connection lives as long as its container: every container would hold
--    a backend of its own. Inside the function the settings are what they were, local to
--    the transaction (`is_local` true: gone at COMMIT or ROLLBACK, so no session state is
--    left to pin for), and none of them is a parameter the server reports to the client.
--    The lock is transaction-level, as before (the page names session-level advisory
--    locks, pg_advisory_lock, not the _xact_ ones).
CREATE FUNCTION grandbo_scope(tenant text, names text[], vals text[], tenant_lock text)
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
BEGIN
    PERFORM set_config('grandbo.tenant_id', tenant, true);
    FOR i IN 1 .. coalesce(array_length(names, 1), 0) LOOP
        PERFORM set_config(names[i], vals[i], true);
    END LOOP;
    IF tenant_lock = 'shared' THEN
        PERFORM pg_advisory_xact_lock_shared(hashtextextended('grandbo.tenant:' || tenant, 0));
    ELSIF tenant_lock = 'exclusive' THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('grandbo.tenant:' || tenant, 0));
    ELSIF tenant_lock <> '' THEN
        RAISE EXCEPTION 'grandbo_scope: no such tenant lock %', tenant_lock;
    END IF;
END
$$;

REVOKE ALL ON FUNCTION grandbo_scope(text, text[], text[], text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION grandbo_scope(text, text[], text[], text) TO grandbo_app;

-- 2. Issue 35, point 6: a statement of the application role ends within 9 s, inside the
--    query function's 10 s. RDS Proxy does not forward a client's CancelRequest, so a
--    search that outlived its Lambda kept its backend busy until it finished. A role
--    default reaches every session of the role, the self-scoped search too, with nothing
--    sent by the client; the maintenance transactions that hold a tenant's exclusive lock
--    (rebuild, purge, a lake import, a model switch) lift it for their own transaction.
ALTER ROLE grandbo_app SET statement_timeout = '9s';

-- 3. The waits for a lock end inside that bound: 8 s, in every tenant scope
--    (grandbo.storage.tenant_scope) and in the self-scoped functions, which set their own
--    (0025, 0027: 10 s, which the 9 s statement bound would now cut short as a
--    "statement timeout" before the lock wait said what it was).
DO $$
DECLARE
    fn regprocedure;
BEGIN
    FOR fn IN
        SELECT p.oid::regprocedure FROM pg_proc p
        WHERE p.pronamespace = 'public'::regnamespace
          AND p.proname IN ('grandbo_search', 'grandbo_pair_distances')
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET lock_timeout = %L', fn, '8s');
    END LOOP;
END
$$;
