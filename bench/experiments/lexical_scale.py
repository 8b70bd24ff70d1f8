"""The lexical leg at 50,000 entries (issue 16, item 1): the product's exact leg against a
leg read to a depth per tag, same run, same topics. The depth-limited leg lives here, not
in the product: measured and not adopted (docs/BENCHMARKS.md).

Read to a depth: each topic tag's postings in impact order (a tag the title carries
first, then the entries with the fewest tags: BM25 saturates with length; an index this
bench creates gives the order) to DEPTH, the entries met ranked by partial score, the best
RESCORE of them scored exactly over every topic tag by the product's own BM25.

For organizations of 5,000, 20,000 and 50,000 synthetic entries (bench.synthetic, bulk
loaded as bench.query_scale loads them, each organization past HNSW_MIN_ENTRIES with its
HNSW index), at each depth: the lexical leg alone and the whole repository search (both
legs, the entries, the coverage; topic embedding excluded), p50 / p95 / p99 ms; the
lexical top 25's overlap with the exact leg's (mean |approx ∩ exact| / |exact|, and the
share of topics whose top 25 is the same set); and the fused top 5's overlap.

    .venv/bin/python -m bench.experiments.lexical_scale [--runs 200] \\
        [--json /tmp/lexical_scale.json]
"""

from __future__ import annotations

import os

os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")

import argparse
import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from bench import synthetic
from bench.query_scale import (
    Lake,
    embedded_pool,
    scratch_server,
    search_once,
    synthetic_topics,
    timed,
)
from grandbo.embedding.local import LocalMiniLMProvider
from grandbo.memory.read.recall import fuse
from grandbo.memory.repository import MemoryRepository, SearchLegs
from grandbo.memory.repository.lexical import _BM25, Corpus
from grandbo.memory.repository.vector_indexes import ensure_hnsw_indexes
from grandbo.storage.connections import app_url_for, connect

EXACT = None  # the product's exact leg
RESCORE = 200
IMPACT_INDEX = (
    "CREATE INDEX bench_postings_impact ON org_memory_tag_postings"
    " (tenant_id, tag, in_title DESC NULLS LAST, tag_count, entry_id) INCLUDE (service, updated_at)"
)
_DEEPEST_POSTINGS = (
    "CROSS JOIN LATERAL (SELECT entry_id, tag_count, in_title, updated_at"
    "   FROM org_memory_tag_postings"
    "   WHERE tenant_id = %(tenant)s AND tag = q.tag"
    "     AND (%(services)s::text[] IS NULL OR service = ANY(%(services)s))"
    "   ORDER BY in_title DESC NULLS LAST, tag_count, entry_id LIMIT %(depth)s) p"
)


class DepthLimitedRepository(MemoryRepository):
    """The product's repository with its lexical leg read to `depth` per tag (None: exact)."""

    depth: int | None = None
    # off: the search skips reading the other leg's signal for candidates one leg found
    # (what it cost before score fusion), to price that read in the same run
    cross_signals: bool = True

    def _send_entries(
        self, tenant_id: str, entry_ids: list[Any], topic: Any, embed_rev: str
    ) -> Any:
        topic = topic if self.cross_signals else None  # without: no distances alongside
        return super()._send_entries(tenant_id, entry_ids, topic, embed_rev)

    def _send_bm25(
        self,
        tenant_id: str,
        corpus: Corpus,
        services: list[str] | None,
        limit: int,
        only: list[Any] | None = None,
    ) -> Any:
        if only is not None and not self.cross_signals:
            return None
        if self.depth is None or only is not None or not corpus.weights:
            return super()._send_bm25(tenant_id, corpus, services, limit, only)
        depth_read = self._sent(
            sql.SQL(_BM25 + " ORDER BY score DESC, p.entry_id LIMIT %(rescore)s").format(
                postings=sql.SQL(_DEEPEST_POSTINGS), where=sql.SQL("")
            ),
            self._parameters(tenant_id, corpus, services)
            | {"depth": self.depth, "rescore": max(RESCORE, limit)},
        )
        met = [row["entry_id"] for row in depth_read]
        return super()._send_bm25(tenant_id, corpus, services, limit, only=met) if met else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--sizes", type=int, nargs="+", default=[5_000, 20_000, 50_000])
    parser.add_argument("--depths", type=int, nargs="+", default=[250, 500, 1_000, 2_000])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    provider = LocalMiniLMProvider()
    texts, pool_vectors = embedded_pool(provider)
    topics = synthetic_topics(provider)
    report: dict[str, Any] = {"runs": args.runs, "topics": len(topics), "organizations": {}}
    with scratch_server() as admin_url:
        lake = Lake(admin_url, provider.embed_rev)
        for size in args.sizes:
            lake.load(f"org-{size}", synthetic.organization(size, texts, pool_vectors, size))
        lake.analyze()
        ensure_hnsw_indexes(admin_url)
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(IMPACT_INDEX)
            conn.execute("ANALYZE org_memory_tag_postings")
        repository = DepthLimitedRepository(connect(app_url_for(admin_url)))

        def search(tenant: str, vector: list[float] | None, tags: list[str]) -> SearchLegs:
            return search_once(repository, tenant, provider, vector, tags)

        def configure(depth: int | None) -> None:
            repository.depth = depth

        def latency(tenant: str, with_vector: bool) -> dict[str, float]:
            it = itertools.cycle(topics)

            def one() -> None:
                vector, tags = next(it)
                search(tenant, vector if with_vector else None, tags)

            return timed(one, args.runs)

        for size in args.sizes:
            tenant = f"org-{size}"
            configure(EXACT)
            exact = [search(tenant, v, t) for v, t in topics]
            rows: dict[str, Any] = {}
            for depth in [EXACT, *args.depths]:
                configure(depth)
                latency(tenant, True)  # warm the cache for this path
                legs = [search(tenant, v, t) for v, t in topics]
                overlap, same, fused5 = [], 0, []
                for got, want in zip(legs, exact, strict=True):
                    a = {c.entry_id for c in got.lexical}
                    b = {c.entry_id for c in want.lexical}
                    overlap.append(len(a & b) / len(b) if b else 1.0)
                    same += a == b
                    top_got = {f.key for f in fuse(got)[:5]}
                    top_want = {f.key for f in fuse(want)[:5]}
                    fused5.append(len(top_got & top_want) / max(len(top_want), 1))
                rows["exact" if depth is None else f"depth {depth}"] = {
                    "lexical_ms": latency(tenant, False),
                    "search_ms": latency(tenant, True),
                    "lexical_top25_overlap": round(float(np.mean(overlap)), 4),
                    "topics_with_identical_top25": f"{same}/{len(topics)}",
                    "fused_top5_overlap": round(float(np.mean(fused5)), 4),
                }
                row = rows["exact" if depth is None else f"depth {depth}"]
                print(
                    f"{size:>6} entries {('exact' if depth is None else f'depth {depth}'):>11}:"
                    f" lexical {row['lexical_ms']}  search {row['search_ms']}"
                    f"  top-25 overlap {row['lexical_top25_overlap']}"
                    f" (identical {row['topics_with_identical_top25']})"
                    f"  fused top-5 overlap {row['fused_top5_overlap']}",
                    flush=True,
                )
            repository.depth, repository.cross_signals = EXACT, False
            latency(tenant, True)
            rows["exact, no cross-leg signals"] = {"search_ms": latency(tenant, True)}
            repository.cross_signals = True
            print(
                f"{size:>6} entries exact search without the cross-leg signals:"
                f" {rows['exact, no cross-leg signals']['search_ms']}",
                flush=True,
            )
            report["organizations"][size] = rows
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
