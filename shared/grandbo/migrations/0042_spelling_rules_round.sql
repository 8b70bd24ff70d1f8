-- The retrieval log's spellings say which round of the spelling rules made them. The
-- rules' second round (grandbo.text.spelling.SPELLING_RULES = 2: capitals that read `i`,
-- look-alikes mapped before the compatibility form, combining marks dropped, base64
-- glued to a path or a name, full-width, UTF-16, hex and nested encodings) finds
-- spellings of a secret the first round did not; a question kept by the first round is
-- searched by what that round spelled until it is spelled again. `grandbo audit` counts
-- those questions (`log_unspelled`) and its repair re-spells them; its re-verification of
-- redaction receipts re-spells them as it reads, so a receipt is verified by the
-- current rules whatever the rows hold.
--
-- Every row kept so far is round 1 (a column with a constant default: no rewrite of the
-- table). The round of a row written from now on is the writer's transaction-local
-- `grandbo.spelling_rules` (code that knows the rules sets it; code older than this
-- migration does not: round 1, counted and re-spelled), recorded by a row trigger on
-- every write of `spelled`, whatever path writes it.
ALTER TABLE org_memory_retrieval_spellings ADD COLUMN rules smallint NOT NULL DEFAULT 1;

CREATE FUNCTION org_memory_retrieval_spellings_rules() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    NEW.rules := coalesce(nullif(current_setting('grandbo.spelling_rules', true), '')::smallint, 1);
    RETURN NEW;
END
$$;

CREATE TRIGGER org_memory_retrieval_spellings_rules
    BEFORE INSERT OR UPDATE OF spelled ON org_memory_retrieval_spellings
    FOR EACH ROW EXECUTE FUNCTION org_memory_retrieval_spellings_rules();
