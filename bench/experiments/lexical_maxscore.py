"""A lexical leg that stops early (issue 28, item 4), measured and NOT adopted: MaxScore
over BM25 of tag sets, exact (the same top 25, scores and order as the exhaustive leg),
on a 50,000-entry organization, beside the exhaustive leg in the same run.

The prototype (`MAXSCORE`, installed on the scratch database only): (A) the entries best
on the three heaviest (rarest) topic tags, 4 x k of them, scored exactly on every tag,
give θ, a lower bound on the k-th best score; (B) the lightest tags whose most possible
contributions sum below θ are "light": an entry holding only those cannot reach θ; every
posting of the other tags is read, the entries that can still reach θ with the light
tags' most at the entry's own length get their light postings by key, and the best k of
the exact scores are the answer. Which tags are light is decided with the loosest bound
per posting (a title tag on an entry of one tag).

    .venv/bin/python -m bench.experiments.lexical_maxscore [--entries 50000]

Figures and why it was not adopted: docs/BENCHMARKS.md, "A search in one round trip".
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.rows import dict_row

from bench import synthetic
from bench.query_scale import Lake, embedded_pool, scratch_server, synthetic_topics
from grandbo.embedding.local import LocalMiniLMProvider
from grandbo.memory.read.recall import LEG_LIMIT
from grandbo.memory.repository.lexical import BM25_B, BM25_K1
from grandbo.memory.repository.postings import TITLE_TAG_TF

MAXSCORE = """CREATE OR REPLACE FUNCTION grandbo_lexical_top(
    p_tenant text, p_tags text[], p_weights float8[], p_services text[], p_k integer,
    p_avgdl float8, p_k1 float8, p_b float8, p_title_tf float8
)
RETURNS TABLE (entry_id uuid, score float8, last timestamptz, postings_read bigint)
LANGUAGE plpgsql
SET search_path = public, pg_temp
AS $fn$
DECLARE
    v_tags text[];
    v_w float8[];
    v_m integer;
    v_bound float8;      -- the most one posting of a tag of weight 1 can add
    v_theta float8 := 0;
    v_head integer;
    v_light integer := 0;
    v_light_bound float8 := 0;
    v_light_w float8 := 0;
    v_read bigint := 0;
    v_n bigint;
    v_eps constant float8 := 1e-6;
BEGIN
    SELECT array_agg(q.tag ORDER BY q.w DESC, q.tag), array_agg(q.w ORDER BY q.w DESC, q.tag)
      INTO v_tags, v_w FROM unnest(p_tags, p_weights) AS q(tag, w);
    v_m := coalesce(cardinality(v_tags), 0);
    IF v_m = 0 THEN
        RETURN;
    END IF;
    -- a title tag (tf = title_tf) on an entry of one tag: no posting adds more
    v_bound := p_title_tf * (p_k1 + 1.0) / (p_title_tf + p_k1 * (1.0 - p_b + p_b * 1.0 / p_avgdl));

    -- A: a lower bound on the k-th best score: the entries best on the heaviest tags,
    -- scored exactly on every tag; θ is the k-th of them
    v_head := least(v_m, 3);
    WITH partial AS (
        SELECT p.entry_id, sum(q.w * t.tf * (p_k1 + 1.0) / (t.tf + p_k1
                   * (1.0 - p_b + p_b * p.tag_count / p_avgdl))) AS s, count(*) AS n
        FROM unnest(v_tags[1:v_head], v_w[1:v_head]) AS q(tag, w)
        JOIN org_memory_tag_postings p ON p.tenant_id = p_tenant AND p.tag = q.tag
        CROSS JOIN LATERAL (SELECT CASE WHEN p.in_title THEN p_title_tf
            ELSE 1.0::float8 END AS tf) t
        WHERE (p_services IS NULL OR p.service = ANY(p_services))
        GROUP BY p.entry_id
    ), best AS (
        SELECT pa.entry_id FROM partial pa ORDER BY pa.s DESC, pa.entry_id LIMIT 4 * p_k
    ), exact AS (
        SELECT sum(q.w * t.tf * (p_k1 + 1.0) / (t.tf + p_k1
                   * (1.0 - p_b + p_b * p.tag_count / p_avgdl))) AS s, count(*) AS n
        FROM unnest(v_tags, v_w) AS q(tag, w)
        JOIN org_memory_tag_postings p ON p.tenant_id = p_tenant AND p.tag = q.tag
          AND p.entry_id = ANY(ARRAY(SELECT b.entry_id FROM best b))
        CROSS JOIN LATERAL (SELECT CASE WHEN p.in_title THEN p_title_tf
            ELSE 1.0::float8 END AS tf) t
        WHERE (p_services IS NULL OR p.service = ANY(p_services))
        GROUP BY p.entry_id
    )
    SELECT coalesce((SELECT e.s FROM exact e ORDER BY e.s DESC OFFSET p_k - 1 LIMIT 1), 0),
           (SELECT sum(pa.n) FROM partial pa) + (SELECT coalesce(sum(e.n), 0) FROM exact e)
      INTO v_theta, v_n;
    v_read := v_read + coalesce(v_n, 0);

    -- the light tags: the lightest, while their bounds sum below θ (an entry holding
    -- only those cannot reach the k-th score)
    FOR i IN REVERSE v_m..1 LOOP
        EXIT WHEN v_light_bound + v_w[i] * v_bound >= v_theta - v_eps OR i = 1;
        v_light_bound := v_light_bound + v_w[i] * v_bound;
        v_light_w := v_light_w + v_w[i];
        v_light := v_light + 1;
    END LOOP;

    -- B: every posting of the heavy tags; the entries that could still reach θ with the
    -- light tags' most, their light postings read by key; exact scores, the best k
    RETURN QUERY
    WITH heavy AS (
        SELECT p.entry_id, sum(q.w * t.tf * (p_k1 + 1.0) / (t.tf + p_k1
                   * (1.0 - p_b + p_b * p.tag_count / p_avgdl))) AS s,
               max(p.updated_at) AS last, count(*) AS n, max(p.tag_count) AS len
        FROM unnest(v_tags[1:v_m - v_light], v_w[1:v_m - v_light]) AS q(tag, w)
        JOIN org_memory_tag_postings p ON p.tenant_id = p_tenant AND p.tag = q.tag
        CROSS JOIN LATERAL (SELECT CASE WHEN p.in_title THEN p_title_tf
            ELSE 1.0::float8 END AS tf) t
        WHERE (p_services IS NULL OR p.service = ANY(p_services))
        GROUP BY p.entry_id
    ), alive AS (
        -- each entry's own bound: the light tags' weights at its own length, in title
        SELECT h.* FROM heavy h
        WHERE h.s + v_light_w * p_title_tf * (p_k1 + 1.0)
              / (p_title_tf + p_k1 * (1.0 - p_b + p_b * h.len / p_avgdl)) >= v_theta - v_eps
    ), light AS (
        SELECT p.entry_id, sum(q.w * t.tf * (p_k1 + 1.0) / (t.tf + p_k1
                   * (1.0 - p_b + p_b * p.tag_count / p_avgdl))) AS s,
               max(p.updated_at) AS last, count(*) AS n
        FROM unnest(v_tags[v_m - v_light + 1:v_m], v_w[v_m - v_light + 1:v_m]) AS q(tag, w)
        JOIN org_memory_tag_postings p ON p.tenant_id = p_tenant AND p.tag = q.tag
          AND p.entry_id = ANY(ARRAY(SELECT a.entry_id FROM alive a))
        CROSS JOIN LATERAL (SELECT CASE WHEN p.in_title THEN p_title_tf
            ELSE 1.0::float8 END AS tf) t
        WHERE (p_services IS NULL OR p.service = ANY(p_services))
        GROUP BY p.entry_id
    ), scored AS (
        SELECT a.entry_id,
               round((a.s + coalesce(l.s, 0)) * 1e9::float8) / 1e9::float8 AS score,
               greatest(a.last, l.last) AS last
        FROM alive a LEFT JOIN light l ON l.entry_id = a.entry_id
    )
    SELECT sc.entry_id, sc.score, sc.last, NULL::bigint FROM (
        SELECT * FROM scored ORDER BY scored.score DESC, scored.last DESC, scored.entry_id LIMIT p_k
    ) sc
    UNION ALL
    SELECT NULL, NULL, NULL,
           (v_read + (SELECT coalesce(sum(h.n), 0) FROM heavy h)
            + (SELECT coalesce(sum(l.n), 0) FROM light l))::bigint;
END
$fn$;
"""

# the exhaustive leg, as grandbo_search and LexicalLeg._send_bm25 run it
EXHAUSTIVE = (
    "SELECT p.entry_id, round(sum(q.w * t.tf * (%(k1)s + 1.0) / (t.tf + %(k1)s"
    " * (1.0 - %(b)s + %(b)s * p.tag_count / %(avgdl)s))) * 1e9::float8) / 1e9::float8 AS score"
    " FROM unnest(%(tags)s::text[], %(weights)s::float8[]) AS q(tag, w)"
    " JOIN org_memory_tag_postings p ON p.tenant_id = %(tenant)s AND p.tag = q.tag"
    " CROSS JOIN LATERAL (SELECT CASE WHEN p.in_title THEN %(title_tf)s::float8"
    "   ELSE 1.0::float8 END AS tf) t"
    " GROUP BY p.entry_id ORDER BY score DESC, max(p.updated_at) DESC, p.entry_id LIMIT %(k)s"
)
EARLY = (
    "SELECT * FROM grandbo_lexical_top(%(tenant)s, %(tags)s::text[], %(weights)s::float8[],"
    " NULL, %(k)s::integer, %(avgdl)s::float8, %(k1)s::float8, %(b)s::float8, %(title_tf)s::float8)"
)


@contextmanager
def large_organization(
    entries: int,
) -> Iterator[tuple[psycopg.Connection[dict[str, Any]], list[tuple[Any, list[str]]]]]:
    """A scratch server holding one organization, 'large', of `entries` synthetic entries
    (bench.synthetic, as the other benchmarks load it): an admin connection to it and the
    benchmarks' topics."""
    provider = LocalMiniLMProvider()
    texts, pool_vectors = embedded_pool(provider)
    topics = synthetic_topics(provider)
    with scratch_server() as admin_url:
        lake = Lake(admin_url, provider.embed_rev)
        lake.load("large", synthetic.organization(entries, texts, pool_vectors, 2))
        lake.analyze()
        with psycopg.connect(admin_url, autocommit=True, row_factory=dict_row) as conn:
            yield conn, topics


def corpus(conn: psycopg.Connection[dict[str, Any]]) -> tuple[int, float]:
    """'large''s active entries and average tag count (the BM25 statistics)."""
    stats = conn.execute(
        "SELECT active_entries AS n, active_tag_total AS total FROM org_memory_tenant_stats"
        " WHERE tenant_id = 'large'"
    ).fetchone()
    assert stats is not None
    return stats["n"], max(stats["total"] / stats["n"], 1.0)


def leg_params(
    conn: psycopg.Connection[dict[str, Any]], n: int, avgdl: float, tags: list[str]
) -> tuple[dict[str, Any], int]:
    """The lexical leg's parameters for a topic over 'large' (its known tags by name, each
    with its idf, as grandbo_search weighs them), and how many postings those tags hold."""
    rows = conn.execute(
        "SELECT tag, doc_count FROM org_memory_tag_stats WHERE tenant_id = 'large'"
        " AND tag = ANY(%s) AND doc_count > 0 ORDER BY tag",
        (sorted(set(tags)),),
    ).fetchall()
    weights = {
        r["tag"]: math.log(1.0 + (n - r["doc_count"] + 0.5) / (r["doc_count"] + 0.5)) for r in rows
    }
    params = {
        "tenant": "large",
        "tags": list(weights),
        "weights": list(weights.values()),
        "avgdl": avgdl,
        "k1": BM25_K1,
        "b": BM25_B,
        "title_tf": TITLE_TAG_TF,
        "k": LEG_LIMIT,
    }
    return params, sum(r["doc_count"] for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with large_organization(args.entries) as (conn, topics):
        conn.execute(MAXSCORE)
        n, avgdl = corpus(conn)
        times: dict[str, list[float]] = {"exhaustive": [], "MaxScore": []}
        read: dict[str, list[int]] = {"exhaustive": [], "MaxScore": []}
        same = 0
        for _ in range(args.rounds):
            for _, tags in topics:
                params, postings = leg_params(conn, n, avgdl, tags)
                t0 = time.perf_counter()
                exhaustive = conn.execute(EXHAUSTIVE, params).fetchall()
                times["exhaustive"].append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                early = conn.execute(EARLY, params).fetchall()
                times["MaxScore"].append((time.perf_counter() - t0) * 1000)
                read["exhaustive"].append(postings)
                read["MaxScore"].append(int(early[-1]["postings_read"]))
                same += [(r["entry_id"], r["score"]) for r in early[:-1]] == [
                    (r["entry_id"], r["score"]) for r in exhaustive
                ]
        searches = len(times["exhaustive"])
        for name in times:
            ordered = sorted(times[name])
            print(
                f"{name}: p50 {statistics.median(ordered):.2f} ms, "
                f"p95 {ordered[int(0.95 * len(ordered))]:.2f} ms, "
                f"postings read per topic {statistics.mean(read[name]):,.0f}"
            )
        print(f"the same top {LEG_LIMIT} (ids, scores, order): {same} of {searches} searches")


if __name__ == "__main__":
    main()
