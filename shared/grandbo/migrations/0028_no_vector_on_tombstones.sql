-- Issue 34, point 4: a tombstone never holds a vector. A redaction does not move an
-- entry's revision, so an embed of its text that finished after the redaction stored the
-- removed text's vector on it (store_embeddings checked the revision only; it now also
-- checks the status). The database refuses it too, whatever path writes: a row trigger on
-- the entries (a CHECK constraint would scan and lock every partition to validate; the
-- trigger only looks at the rows written). A vector already on a tombstone is left for
-- `rebuild --verify` and the health audit to report and the projection repair to clear.
CREATE FUNCTION org_memory_entries_no_vector_on_tombstone() RETURNS trigger
LANGUAGE plpgsql
SET search_path = public, pg_temp
AS $fn$
BEGIN
    RAISE EXCEPTION 'entry % is redacted: a tombstone holds no vector', NEW.entry_id
        USING ERRCODE = 'check_violation';
END
$fn$;
CREATE TRIGGER org_memory_entries_no_vector_on_tombstone
    BEFORE INSERT OR UPDATE ON org_memory_entries
    FOR EACH ROW
    WHEN (NEW.status = 'redacted' AND NEW.embedding IS NOT NULL)
    EXECUTE FUNCTION org_memory_entries_no_vector_on_tombstone();
