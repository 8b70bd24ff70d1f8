"""The threshold algorithm on the lexical leg (issue 28, item 4), measured and NOT adopted.

BM25 over tag sets: a tag's contribution to an entry depends only on the tag's weight,
whether the entry's title carries it and the entry's tag count, so each tag's postings can
be read in descending contribution. The threshold algorithm (Fagin, Lotem and Naor) reads
the postings in that order, always the tag whose next contribution is largest, scores
every newly seen entry exactly, and stops once the 25th best exact score is above the sum
of every tag's next unread contribution (strictly above: an unseen entry could tie it, and
ties are broken by recency and id). Its answer is the exact top 25.

What it costs is split in two here, on a 50,000-entry organization (bench.synthetic, as the
other benchmarks load it), the benchmarks' 40 topics, each beside the exhaustive leg in
the same run:

1. the postings it reads, counted by running the algorithm over the topic's postings as
   the database holds them (read once per topic, in Python); its top 25 (ids and scores)
   is checked against the exhaustive leg's;
2. what scoring its candidates exactly costs in PostgreSQL: one statement over the
   postings of exactly the entries it saw, by the primary key (tag, entry) and by the
   entry index, timed beside the exhaustive leg (the leg `grandbo_search` runs) on the same
   connection. Reading the postings themselves in contribution order would come on top
   (an index on (tag, in_title, tag_count) that the write path does not keep today).

    .venv/bin/python -m bench.experiments.lexical_threshold [--entries 50000]

Figures and why it was not adopted: docs/BENCHMARKS.md, "A search in one round trip".
"""

from __future__ import annotations

import argparse
import heapq
import statistics
import time
from typing import Any

from bench.experiments.lexical_maxscore import EXHAUSTIVE, corpus, large_organization, leg_params
from bench.query_scale import percentiles
from grandbo.memory.read.recall import LEG_LIMIT
from grandbo.memory.repository.lexical import BM25_B, BM25_K1
from grandbo.memory.repository.postings import TITLE_TAG_TF

# the candidates' exact scores through the primary key (tenant, tag, entry_id)
BY_KEY = (
    "SELECT p.entry_id, round(sum(q.w * t.tf * (%(k1)s + 1.0) / (t.tf + %(k1)s"
    " * (1.0 - %(b)s + %(b)s * p.tag_count / %(avgdl)s))) * 1e9::float8) / 1e9::float8 AS score"
    " FROM unnest(%(tags)s::text[], %(weights)s::float8[]) AS q(tag, w)"
    " JOIN org_memory_tag_postings p ON p.tenant_id = %(tenant)s AND p.tag = q.tag"
    "  AND p.entry_id = ANY(%(seen)s::uuid[])"
    " CROSS JOIN LATERAL (SELECT CASE WHEN p.in_title THEN %(title_tf)s::float8"
    "   ELSE 1.0::float8 END AS tf) t"
    " GROUP BY p.entry_id ORDER BY score DESC, max(p.updated_at) DESC, p.entry_id LIMIT %(k)s"
)
# the same through the entry index (tenant, entry_id): every posting of those entries
BY_ENTRY = (
    "SELECT p.entry_id, round(sum(q.w * t.tf * (%(k1)s + 1.0) / (t.tf + %(k1)s"
    " * (1.0 - %(b)s + %(b)s * p.tag_count / %(avgdl)s))) * 1e9::float8) / 1e9::float8 AS score"
    " FROM org_memory_tag_postings p"
    " JOIN unnest(%(tags)s::text[], %(weights)s::float8[]) AS q(tag, w) ON q.tag = p.tag"
    " CROSS JOIN LATERAL (SELECT CASE WHEN p.in_title THEN %(title_tf)s::float8"
    "   ELSE 1.0::float8 END AS tf) t"
    " WHERE p.tenant_id = %(tenant)s AND p.entry_id = ANY(%(seen)s::uuid[])"
    " GROUP BY p.entry_id ORDER BY score DESC, max(p.updated_at) DESC, p.entry_id LIMIT %(k)s"
)


def threshold_algorithm(
    lists: dict[str, list[tuple[float, Any]]], exact: dict[Any, float], k: int
) -> tuple[int, set[Any]]:
    """Fagin's TA over `lists` (each tag's (contribution, entry) in descending order),
    `exact` standing for the random access that scores an entry on every tag: the postings
    read before the k-th exact score passes the bound, and the entries seen."""
    at = dict.fromkeys(lists, 0)
    seen: set[Any] = set()
    best: list[float] = []
    read = 0
    while True:
        following = {t: (lists[t][at[t]][0] if at[t] < len(lists[t]) else 0.0) for t in lists}
        if len(best) >= k and best[0] > sum(following.values()) + 1e-9:
            return read, seen
        tag = max(following, key=lambda t: following[t])
        if following[tag] == 0.0:
            return read, seen
        _, entry = lists[tag][at[tag]]
        at[tag] += 1
        read += 1
        if entry not in seen:
            seen.add(entry)
            if len(best) < k:
                heapq.heappush(best, exact[entry])
            elif exact[entry] > best[0]:
                heapq.heapreplace(best, exact[entry])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=50_000)
    args = parser.parse_args()
    with large_organization(args.entries) as (conn, topics):
        n, avgdl = corpus(conn)
        times: dict[str, list[float]] = {"exhaustive": [], "by key": [], "by entry": []}
        read, seen_counts, every = [], [], []
        same = 0
        for _, tags in topics:
            params, _ = leg_params(conn, n, avgdl, tags)
            weights = dict(zip(params["tags"], params["weights"], strict=True))
            lists: dict[str, list[tuple[float, Any]]] = {}
            exact: dict[Any, float] = {}
            for p in conn.execute(
                "SELECT tag, entry_id, in_title, tag_count FROM org_memory_tag_postings"
                " WHERE tenant_id = 'large' AND tag = ANY(%s)",
                (list(weights),),
            ):
                tf = TITLE_TAG_TF if p["in_title"] else 1.0
                part = (
                    weights[p["tag"]]
                    * tf
                    * (BM25_K1 + 1.0)
                    / (tf + BM25_K1 * (1.0 - BM25_B + BM25_B * p["tag_count"] / avgdl))
                )
                lists.setdefault(p["tag"], []).append((part, p["entry_id"]))
                exact[p["entry_id"]] = exact.get(p["entry_id"], 0.0) + part
            for postings in lists.values():
                postings.sort(key=lambda x: -x[0])
            postings_read, seen = threshold_algorithm(lists, exact, LEG_LIMIT)
            read.append(postings_read)
            seen_counts.append(len(seen))
            every.append(sum(len(v) for v in lists.values()))
            params["seen"] = list(seen)
            answers = {}
            for name, statement in (
                ("exhaustive", EXHAUSTIVE),
                ("by key", BY_KEY),
                ("by entry", BY_ENTRY),
            ):
                t0 = time.perf_counter()
                answers[name] = [
                    (r["entry_id"], r["score"]) for r in conn.execute(statement, params)
                ]
                times[name].append((time.perf_counter() - t0) * 1000)
            same += answers["by key"] == answers["exhaustive"] == answers["by entry"]
        print(
            f"postings per topic: {statistics.mean(every):,.0f} (the exhaustive leg reads all);"
            f" the threshold algorithm reads {statistics.mean(read):,.0f}"
            f" (max {max(read):,}) and scores {statistics.mean(seen_counts):,.0f} entries"
            f" exactly (max {max(seen_counts):,})"
        )
        labels = {
            "exhaustive": "exhaustive leg",
            "by key": "scoring the TA's candidates, by (tag, entry)",
            "by entry": "scoring the TA's candidates, by entry",
        }
        for name, samples in times.items():
            figures = percentiles(samples)
            print(f"{labels[name]}: p50 {figures['p50']:.2f} ms, p95 {figures['p95']:.2f} ms")
        print(f"the same top {LEG_LIMIT} (ids, scores, order): {same} of {len(topics)} topics")


if __name__ == "__main__":
    main()
