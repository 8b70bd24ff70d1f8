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
-- `grandbo.spelling_rules` (code that knows the rules states it in every tenant
-- transaction, through grandbo_scope, and in the log's write below; code older than this
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

-- The log's write with the round of the rules that spelled the question: set in the
-- server (a set_config the client sent would pin an RDS Proxy connection), for the write
-- alone. A writer of code older than this migration calls the 10-argument function:
-- round 1.
CREATE FUNCTION grandbo_log_retrieval(
    p_tenant text, p_at timestamptz, p_caller text, p_incident text, p_topic text,
    p_hits jsonb, p_latency_ms double precision, p_no_precedent boolean,
    p_rows_per_day integer, p_spelled text, p_rules smallint
) RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
BEGIN
    PERFORM set_config('grandbo.spelling_rules', p_rules::text, true);
    PERFORM grandbo_log_retrieval(
        p_tenant, p_at, p_caller, p_incident, p_topic, p_hits, p_latency_ms, p_no_precedent,
        p_rows_per_day, p_spelled);
    PERFORM set_config('grandbo.spelling_rules', '', true);
END
$$;
REVOKE ALL ON FUNCTION grandbo_log_retrieval(text, timestamptz, text, text, text, jsonb, double precision, boolean, integer, text, smallint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION grandbo_log_retrieval(text, timestamptz, text, text, text, jsonb, double precision, boolean, integer, text, smallint) TO grandbo_app;
