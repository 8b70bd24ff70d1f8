-- Issue 53: tags kept as they were written. Until now an entry held one list of tags,
-- the lexical index's (stems: `redis` stored as `redi`), and that list is what the API,
-- the console's Correct form, the MCP text and exports showed, and what saving the form
-- stored back. Now the index keeps its stems in `tags` and the entry keeps what it was
-- given, as written, in `given_tags` (the events carry it as `given_tags` too).
--
-- NULL is "stored before this migration": the database cannot say which of the stems
-- were given (that needs the tokenizer), so `grandbo.memory.service.MemoryService.
-- fill_given_tags` fills it (the runner's start, the backfill Lambda, a rebuild) with
-- the stems that are not the entry's own words, each spelled back in a word the lake
-- wrote it from; until then a read shows those stems.
--
-- grandbo_search returns the column too (its row type changes: dropped and created
-- again, in this migration's transaction, with 0022's grants and 0031's lock wait); the
-- rest of the function is 0025's.

ALTER TABLE org_memory_entries ADD COLUMN IF NOT EXISTS given_tags text[];
-- what the backfill looks for, each hour in AWS: empty once filled
CREATE INDEX IF NOT EXISTS org_memory_entries_given_unfilled ON org_memory_entries (tenant_id)
    WHERE given_tags IS NULL;

DROP FUNCTION grandbo_search(text, text[], halfvec, text, float8, text[], integer,
    timestamptz, uuid[], float8, float8, float8, text, text);

CREATE FUNCTION grandbo_search(
    p_tenant text,
    p_tags text[],
    p_query halfvec,
    p_rev text,
    p_cutoff float8,
    p_services text[],
    p_leg_limit integer,
    p_now timestamptz,
    p_probe uuid[],
    p_k1 float8,
    p_b float8,
    p_title_tf float8,
    p_iterative_scan text,
    p_ef_search text
)
RETURNS TABLE (
    part text,
    lexical_rank bigint,
    lexical_score float8,
    vector_rank bigint,
    distance float8,
    candidate boolean,
    probe boolean,
    active_entries integer,
    avgdl float8,
    expired bigint,
    active bigint,
    without_vector bigint,
    corpus_tags text[],
    corpus_weights float8[],
    tenant_id text,
    entry_id uuid,
    title text,
    summary text,
    tags text[],
    service text,
    origin text,
    status text,
    revision integer,
    incident_id text,
    superseded_by uuid,
    created_at timestamptz,
    updated_at timestamptz,
    embed_rev text,
    embedded_revision integer,
    helpful_count integer,
    not_helpful_count integer,
    misleading_count integer,
    kind text,
    expires_at timestamptz,
    merged_into uuid,
    never_merge boolean,
    seen_count integer,
    last_seen_at timestamptz,
    seen_in_incidents text[],
    given_tags text[]
)
LANGUAGE plpgsql
SET search_path = public, pg_temp
SET plan_cache_mode = force_generic_plan
SET lock_timeout = '8s'
AS $fn$
DECLARE
    v_found boolean;
    v_n integer := 0;
    v_total bigint := 0;
    v_avgdl float8 := 1.0;
    v_expired bigint := 0;
    v_tags text[] := '{}';
    v_weights float8[] := '{}';
    v_lex uuid[] := '{}';
    v_lex_scores float8[] := '{}';
    v_vec uuid[] := '{}';
    v_vec_dist float8[] := '{}';
    v_need uuid[] := '{}';
    v_extra uuid[] := '{}';
    v_extra_scores float8[] := '{}';
    v_active bigint;
    v_without bigint;
    v_ids uuid[];
BEGIN
    -- the tenant for this transaction only (one statement: the statement's own), unless
    -- the caller's scope set it already; another tenant's scope is refused
    IF p_tenant IS NULL OR p_tenant = '' THEN
        RAISE EXCEPTION 'grandbo_search needs a tenant' USING ERRCODE = 'insufficient_privilege';
    ELSIF grandbo_current_tenant() IS NULL THEN
        PERFORM set_config('grandbo.tenant_id', p_tenant, true);
    ELSIF grandbo_current_tenant() IS DISTINCT FROM p_tenant THEN
        RAISE EXCEPTION 'grandbo_search outside its tenant''s scope'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- the vector leg's settings (search.VECTOR_LEG_SETTINGS), for this transaction
    PERFORM set_config('hnsw.iterative_scan', p_iterative_scan, true),
            set_config('hnsw.ef_search', p_ef_search, true);

    -- the corpus (LexicalLeg._send_corpus, Corpus.read)
    SELECT t.active_entries, t.active_tag_total INTO v_n, v_total
    FROM org_memory_tenant_stats t WHERE t.tenant_id = p_tenant;
    v_found := FOUND;
    IF NOT v_found THEN
        v_n := 0;
        v_total := 0;
    ELSE
        SELECT count(*) INTO v_expired FROM org_memory_entries e
        WHERE e.tenant_id = p_tenant AND e.status = 'active' AND e.kind = 'episodic'
          AND e.expires_at <= p_now;
        v_avgdl := CASE WHEN v_n > 0 THEN greatest(v_total::float8 / v_n, 1.0::float8)
                        ELSE 1.0::float8 END;
        SELECT coalesce(array_agg(s.tag ORDER BY s.tag), '{}'),
               coalesce(array_agg(ln(1.0::float8 + ((v_n - s.doc_count)::float8 + 0.5::float8)
                                     / (s.doc_count::float8 + 0.5::float8)) ORDER BY s.tag), '{}')
          INTO v_tags, v_weights
        FROM org_memory_tag_stats s
        WHERE s.tenant_id = p_tenant AND s.tag = ANY(p_tags) AND s.doc_count > 0;
    END IF;

    -- the vector leg (search._VECTOR_LEG): the cached generic plan (an exact scan of the
    -- tenant's rows) unless the tenant has its own partial HNSW index, which only a plan
    -- made with the tenant's value can use: then planned on each call (EXECUTE)
    IF p_query IS NOT NULL AND to_regclass(grandbo_hnsw_index_name(p_tenant)) IS NULL THEN
        SELECT coalesce(array_agg(v.entry_id ORDER BY v.distance, v.entry_id), '{}'),
               coalesce(array_agg(v.distance ORDER BY v.distance, v.entry_id), '{}')
          INTO v_vec, v_vec_dist
        FROM (
            SELECT nearest.entry_id, nearest.distance FROM (
                SELECT e.entry_id, e.embedding <=> p_query AS distance FROM org_memory_entries e
                WHERE e.tenant_id = p_tenant AND e.status = 'active' AND e.embed_rev = p_rev
                  AND (p_services IS NULL OR e.service = ANY(p_services))
                  AND (p_now IS NULL OR e.expires_at IS NULL OR e.expires_at > p_now)
                ORDER BY e.embedding <=> p_query, e.entry_id LIMIT p_leg_limit
            ) nearest WHERE nearest.distance < p_cutoff
        ) v;
    ELSIF p_query IS NOT NULL THEN
        EXECUTE $vec$
            SELECT coalesce(array_agg(v.entry_id ORDER BY v.distance, v.entry_id), '{}'),
                   coalesce(array_agg(v.distance ORDER BY v.distance, v.entry_id), '{}')
            FROM (
                SELECT nearest.entry_id, nearest.distance FROM (
                    SELECT e.entry_id, e.embedding <=> $2 AS distance
                    FROM org_memory_entries e
                    WHERE e.tenant_id = $1 AND e.status = 'active' AND e.embed_rev = $3
                      AND ($4::text[] IS NULL OR e.service = ANY($4))
                      AND ($5::timestamptz IS NULL OR e.expires_at IS NULL OR e.expires_at > $5)
                    ORDER BY e.embedding <=> $2, e.entry_id LIMIT $6
                ) nearest WHERE nearest.distance < $7
            ) v
        $vec$
          INTO v_vec, v_vec_dist
          USING p_tenant, p_query, p_rev, p_services, p_now, p_leg_limit, p_cutoff;
    END IF;

    -- the coverage (EntrySearch._send_coverage)
    IF p_services IS NULL THEN
        v_active := NULL;
        -- three range reads of the (tenant_id, embed_rev) index, where one filtered read
        -- of every active entry is what a generic plan makes of their OR
        SELECT (SELECT count(*) FROM org_memory_entries e
                WHERE e.tenant_id = p_tenant AND e.status = 'active' AND e.embed_rev IS NULL)
             + (SELECT count(*) FROM org_memory_entries e
                WHERE e.tenant_id = p_tenant AND e.status = 'active' AND e.embed_rev < p_rev)
             + (SELECT count(*) FROM org_memory_entries e
                WHERE e.tenant_id = p_tenant AND e.status = 'active' AND e.embed_rev > p_rev)
          INTO v_without;
    ELSE
        SELECT count(*), count(*) FILTER (WHERE e.embed_rev IS DISTINCT FROM p_rev)
          INTO v_active, v_without
        FROM org_memory_entries e
        WHERE e.tenant_id = p_tenant AND e.status = 'active' AND e.service = ANY(p_services);
    END IF;

    IF cardinality(v_tags) > 0 THEN
        -- the lexical leg (LexicalLeg._send_bm25 over every posting), a few more rows
        -- than the leg keeps when episodic entries expired unswept
        SELECT coalesce(array_agg(l.entry_id ORDER BY l.score DESC, l.last DESC, l.entry_id), '{}'),
               coalesce(array_agg(l.score ORDER BY l.score DESC, l.last DESC, l.entry_id), '{}')
          INTO v_lex, v_lex_scores
        FROM (
            SELECT p.entry_id,
                   round(sum(q.w * t.tf * (p_k1 + 1.0) / (t.tf + p_k1
                       * (1.0 - p_b + p_b * p.tag_count / v_avgdl))) * 1e9::float8)
                       / 1e9::float8 AS score,
                   max(p.updated_at) AS last
            FROM unnest(v_tags, v_weights) AS q(tag, w)
            JOIN org_memory_tag_postings p ON p.tenant_id = p_tenant AND p.tag = q.tag
            CROSS JOIN LATERAL (SELECT CASE WHEN p.in_title THEN p_title_tf
                ELSE 1.0::float8 END AS tf) t
            WHERE (p_services IS NULL OR p.service = ANY(p_services))
            GROUP BY p.entry_id
            ORDER BY score DESC, max(p.updated_at) DESC, p.entry_id
            LIMIT p_leg_limit + v_expired
        ) l;
        -- the BM25 of the vector leg's entries the lexical leg did not list, and of the
        -- probes (the postings of those entries only)
        v_need := ARRAY(
            SELECT DISTINCT x FROM unnest(v_vec || coalesce(p_probe, '{}')) AS x
            WHERE x <> ALL (v_lex)
        );
        IF cardinality(v_need) > 0 THEN
            SELECT coalesce(array_agg(b.entry_id), '{}'), coalesce(array_agg(b.score), '{}')
              INTO v_extra, v_extra_scores
            FROM (
                SELECT p.entry_id,
                       round(sum(q.w * t.tf * (p_k1 + 1.0) / (t.tf + p_k1
                           * (1.0 - p_b + p_b * p.tag_count / v_avgdl))) * 1e9::float8)
                           / 1e9::float8 AS score
                FROM unnest(v_tags, v_weights) AS q(tag, w)
                JOIN org_memory_tag_postings p
                  ON p.tenant_id = p_tenant AND p.tag = q.tag AND p.entry_id = ANY(v_need)
                CROSS JOIN LATERAL (SELECT CASE WHEN p.in_title THEN p_title_tf
                    ELSE 1.0::float8 END AS tf) t
                WHERE (p_services IS NULL OR p.service = ANY(p_services))
                GROUP BY p.entry_id
            ) b;
        END IF;
    END IF;

    part := 'corpus';
    active_entries := v_n;
    avgdl := v_avgdl;
    expired := v_expired;
    active := v_active;
    without_vector := v_without;
    corpus_tags := CASE WHEN v_found THEN v_tags END;
    corpus_weights := CASE WHEN v_found THEN v_weights END;
    RETURN NEXT;

    -- one array variable: a generic plan probes the primary key with it, where it read
    -- every row of the tenant to filter by an expression of three arrays
    v_ids := v_lex || v_vec || coalesce(p_probe, '{}');
    RETURN QUERY
    WITH lex AS (
        SELECT u.id, u.score, u.ord FROM unnest(v_lex, v_lex_scores) WITH ORDINALITY AS u(id, score, ord)
    ), vec AS (
        SELECT u.id, u.dist, u.ord FROM unnest(v_vec, v_vec_dist) WITH ORDINALITY AS u(id, dist, ord)
    ), extra AS (
        SELECT u.id, u.score FROM unnest(v_extra, v_extra_scores) AS u(id, score)
    ), fetched AS (
        SELECT e.*, CASE WHEN e.status = 'active' AND e.embed_rev = p_rev
                         THEN e.embedding <=> p_query END AS own_distance
        FROM org_memory_entries e
        WHERE e.tenant_id = p_tenant AND e.entry_id = ANY(v_ids)
    ), kept AS (
        SELECT f.entry_id FROM fetched f
        WHERE v_expired = 0 OR f.expires_at IS NULL OR (p_now IS NOT NULL AND f.expires_at > p_now)
    ), lex_final AS (
        SELECT l.id, row_number() OVER (ORDER BY l.ord) AS rank
        FROM lex l JOIN kept k ON k.entry_id = l.id ORDER BY l.ord LIMIT p_leg_limit
    ), vec_final AS (
        SELECT v.id, row_number() OVER (ORDER BY v.ord) AS rank
        FROM vec v JOIN kept k ON k.entry_id = v.id ORDER BY v.ord LIMIT p_leg_limit
    )
    SELECT 'entry'::text, lf.rank, coalesce(l.score, x.score), vf.rank,
           coalesce(v.dist, f.own_distance),
           (lf.id IS NOT NULL OR vf.id IS NOT NULL),
           f.entry_id = ANY(coalesce(p_probe, '{}')),
           NULL::integer, NULL::float8, NULL::bigint, NULL::bigint, NULL::bigint,
           NULL::text[], NULL::float8[],
           f.tenant_id, f.entry_id, f.title, f.summary, f.tags, f.service, f.origin, f.status,
           f.revision, f.incident_id, f.superseded_by, f.created_at, f.updated_at, f.embed_rev,
           f.embedded_revision, f.helpful_count, f.not_helpful_count, f.misleading_count,
           f.kind, f.expires_at, f.merged_into, f.never_merge, f.seen_count, f.last_seen_at,
           f.seen_in_incidents, f.given_tags
    FROM fetched f
    LEFT JOIN lex_final lf ON lf.id = f.entry_id
    LEFT JOIN vec_final vf ON vf.id = f.entry_id
    LEFT JOIN lex l ON l.id = f.entry_id
    LEFT JOIN vec v ON v.id = f.entry_id
    LEFT JOIN extra x ON x.id = f.entry_id
    WHERE lf.id IS NOT NULL OR vf.id IS NOT NULL OR f.entry_id = ANY(coalesce(p_probe, '{}'));
END
$fn$;

REVOKE ALL ON FUNCTION grandbo_search(text, text[], halfvec, text, float8, text[], integer,
    timestamptz, uuid[], float8, float8, float8, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION grandbo_search(text, text[], halfvec, text, float8, text[], integer,
    timestamptz, uuid[], float8, float8, float8, text, text) TO grandbo_app;
