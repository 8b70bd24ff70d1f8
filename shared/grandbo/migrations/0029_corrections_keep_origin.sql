-- Issue 34, point 9: a correction keeps the entry's origin. Before, a correction set the
-- origin to 'correction', so an incident's lesson corrected by an admin was no longer
-- found by a filter on origin 'incident' (its revision already says it was corrected).
-- The fold no longer changes the origin on `entry_corrected`; the entries corrected
-- before get back the origin their `entry_created` event records. A tombstone keeps the
-- origin its redaction recorded (its created event's payload was removed with the text).
UPDATE org_memory_entries e
   SET origin = c.payload->>'origin'
  FROM org_memory_events c
 WHERE e.origin = 'correction'
   AND e.status <> 'redacted'
   AND c.tenant_id = e.tenant_id
   AND c.entry_id = e.entry_id
   AND c.event_type = 'entry_created'
   AND c.payload->>'origin' IN ('incident', 'admin');
