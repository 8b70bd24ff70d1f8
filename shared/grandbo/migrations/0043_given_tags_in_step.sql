-- Issue 53's break-it review: migration 0041 added `given_tags` (the tags as written) and
-- nothing kept it in step with `tags` (the lexical index's stems) for a writer that does
-- not know it: code from before 0041 (a rollback after a failed deploy leaves the schema
-- here). Its correction rewrote `tags` and left the previous revision's `given_tags`, not
-- NULL, so the backfill never filled it again: the entry showed tags it no longer had.
--
-- Code that writes `given_tags` says so in every tenant transaction it opens (the
-- transaction-local `grandbo.writes_given_tags`, grandbo.storage.tenant_scope). A write
-- by any other writer that changes an entry's stems or its revision (a correction, even
-- one whose stems come out the same) and leaves `given_tags` as it was leaves it NULL,
-- which the backfill (the runner's start, the backfill Lambda each hour, `grandbo
-- rebuild`) fills from the lake again; a writer that wrote `given_tags` itself (code of
-- 0041 and 0042, which does not say so) keeps what it wrote.
CREATE FUNCTION org_memory_entries_given_tags_in_step() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.tags IS DISTINCT FROM OLD.tags OR NEW.revision IS DISTINCT FROM OLD.revision)
       AND NEW.given_tags IS NOT DISTINCT FROM OLD.given_tags
       AND coalesce(current_setting('grandbo.writes_given_tags', true), '') <> 'on' THEN
        NEW.given_tags := NULL;
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER org_memory_entries_given_tags_in_step
    BEFORE UPDATE OF tags, revision ON org_memory_entries
    FOR EACH ROW EXECUTE FUNCTION org_memory_entries_given_tags_in_step();
