-- Idempotency keys that cannot collide (grandbo.memory.idempotency). Keys were built by
-- joining ids with ':' while ids may contain ':', so incident `INC-9:finding:x` / finding
-- `y` and incident `INC-9` / finding `x:finding:y` shared a key and the second finding was
-- dropped; and a raw CLI key could take a key an incident or an admin would need. From now
-- on every key is `namespace:part:...` with '%' written '%25' and ':' written '%3A' in
-- each part. Keys of ids without ':' or '%' are unchanged; this rewrites the stored keys
-- that are not, reading each part back from what the event itself records (the incident
-- id in its payload, the signing key in its actor), so a redelivered event or a retried
-- request still finds its earlier write, and a finding dropped by a collision is written
-- when its incident is delivered again.
--
-- The event log is append-only for every role; this one-time re-keying touches only the
-- idempotency key (never an event's content) with the guard lifted inside this
-- migration's own transaction. Row-level security is forced on the table and the schema
-- owner is not a superuser in Aurora, so it is lifted the same way.

CREATE FUNCTION pg_temp.grandbo_key_part(part text) RETURNS text
    LANGUAGE sql IMMUTABLE AS $$ SELECT replace(replace(part, '%', '%25'), ':', '%3A') $$;

CREATE TEMP TABLE grandbo_rekeyed ON COMMIT DROP AS
SELECT event_id, idempotency_key AS old_key, CASE
    -- an incident's corroborated finding: incident:{incident_id}:finding:{finding_id}
    WHEN event_type = 'entry_created' AND payload->>'origin' = 'incident'
         AND actor = 'incident-closed:' || (payload->>'incident_id')
         AND starts_with(idempotency_key, 'incident:' || (payload->>'incident_id') || ':finding:')
    THEN 'incident:' || pg_temp.grandbo_key_part(payload->>'incident_id') || ':finding:'
         || pg_temp.grandbo_key_part(substr(idempotency_key,
                length('incident:' || (payload->>'incident_id') || ':finding:') + 1))
    -- an admin's keys are the signing key's own (actor admin:{key_id}):
    -- admin:create:{key} -> admin:{key_id}:create:{key}
    WHEN actor LIKE 'admin:%' AND starts_with(idempotency_key, 'admin:create:')
    THEN 'admin:' || pg_temp.grandbo_key_part(substr(actor, 7)) || ':create:'
         || pg_temp.grandbo_key_part(substr(idempotency_key, 14))
    -- admin:{correct|retire}:{entry_id}:{key} -> admin:{key_id}:{correct|retire}:{entry_id}:{key}
    WHEN actor LIKE 'admin:%'
         AND idempotency_key ~ '^admin:(correct|retire):[0-9a-f-]{36}:'
    THEN 'admin:' || pg_temp.grandbo_key_part(substr(actor, 7)) || ':'
         || substring(idempotency_key from '^admin:((?:correct|retire):[0-9a-f-]{36}:)')
         || pg_temp.grandbo_key_part(substr(idempotency_key, length(
                substring(idempotency_key from '^admin:(?:correct|retire):[0-9a-f-]{36}:')) + 1))
    -- an admin write without a key: admin:{key_id}:{nonce} -> admin:{key_id}:nonce:{nonce}
    WHEN actor LIKE 'admin:%' AND starts_with(idempotency_key, 'admin:' || substr(actor, 7) || ':')
    THEN 'admin:' || pg_temp.grandbo_key_part(substr(actor, 7)) || ':nonce:'
         || pg_temp.grandbo_key_part(substr(idempotency_key, length('admin:' || substr(actor, 7) || ':') + 1))
    -- the eval harness's and the demo's entries (incident-origin, which the CLI never
    -- writes: an --actor naming them does not make a CLI key theirs)
    WHEN actor = 'grandbo-eval' AND starts_with(idempotency_key, 'eval:')
         AND event_type = 'entry_created' AND payload->>'origin' = 'incident'
    THEN 'eval:' || pg_temp.grandbo_key_part(substr(idempotency_key, 6))
    WHEN actor = 'grandbo-demo' AND event_type = 'entry_created'
         AND payload->>'origin' = 'incident'
         AND idempotency_key = 'demo:' || (payload->>'incident_id')
    THEN 'demo:' || pg_temp.grandbo_key_part(payload->>'incident_id')
    -- anything else was the CLI's: a caller's raw key (--idempotency-key), or one the CLI
    -- made up (cli:{operation}:{uuid}, never retried across versions, so re-keying it is
    -- harmless and a raw key of that shape keeps its match). Now kept per command and
    -- entry: cli:add:{key}, cli:correct:{entry_id}:{key}, cli:retire:{entry_id}:{key}
    WHEN event_type = 'entry_created'
    THEN 'cli:add:' || pg_temp.grandbo_key_part(idempotency_key)
    WHEN event_type = 'entry_corrected'
    THEN 'cli:correct:' || entry_id || ':' || pg_temp.grandbo_key_part(idempotency_key)
    ELSE 'cli:retire:' || entry_id || ':' || pg_temp.grandbo_key_part(idempotency_key)
END AS new_key
FROM org_memory_events;

-- The new keys are unique (the rewrite is one-to-one), but a row may take a key another
-- row gives up in the same statement: the constraint is checked once, at the end.
ALTER TABLE org_memory_events NO FORCE ROW LEVEL SECURITY;
ALTER TABLE org_memory_events DISABLE TRIGGER org_memory_events_no_update_delete;
ALTER TABLE org_memory_events DROP CONSTRAINT org_memory_events_idempotency;
UPDATE org_memory_events e SET idempotency_key = r.new_key
    FROM grandbo_rekeyed r
    WHERE e.event_id = r.event_id AND r.new_key <> r.old_key;
ALTER TABLE org_memory_events ADD CONSTRAINT org_memory_events_idempotency
    UNIQUE (tenant_id, idempotency_key);
ALTER TABLE org_memory_events ENABLE TRIGGER org_memory_events_no_update_delete;
ALTER TABLE org_memory_events FORCE ROW LEVEL SECURITY;
