"""Half-precision vectors (issue 16, item 3): `halfvec(1024)` against `vector(1024)`, same
run, same organizations, same topics.

Synthetic organizations of 5,000 and 50,000 entries (bench.synthetic) are bulk-loaded
into the product's `org_memory_entries` (`halfvec(1024)` since migration 0015, PLAIN
storage), then copied row for row into a table of the same layout whose `embedding` is
`vector(1024)`, as it was before. For each:
table size, the exact scan of one organization (p50 / p95 / p99 ms), the HNSW build (s)
and index size of the 50,000-entry organization, its index scan latency and recall@25
against the exact float32 top 25 (numpy).

    .venv/bin/python -m bench.experiments.halfvec [--runs 200] [--json /tmp/halfvec.json]
"""

from __future__ import annotations

import os

os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")

import argparse
import itertools
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector import HalfVector, Vector
from pgvector.psycopg import register_vector

from bench import synthetic
from bench.query_scale import Lake, embedded_pool, scratch_server, synthetic_topics, timed
from grandbo.embedding.local import LocalMiniLMProvider
from grandbo.memory.read.recall import LEG_LIMIT
from grandbo.memory.repository.vector_indexes import HNSW_EF_SEARCH

TYPES = {  # kind: (table, parameter type, HNSW operator class, its organizations' prefix)
    "vector": ("bench_vector_entries", Vector, "vector_cosine_ops", "vec-"),
    "halfvec": ("org_memory_entries", HalfVector, "halfvec_cosine_ops", ""),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    provider = LocalMiniLMProvider()
    texts, pool_vectors = embedded_pool(provider)
    topics = [np.asarray(v, dtype=np.float32) for v, _ in synthetic_topics(provider)]
    report: dict[str, Any] = {"runs": args.runs}
    with scratch_server() as admin_url:
        lake = Lake(admin_url, provider.embed_rev)
        sizes = {"org-5000": 5_000, "org-50000": 50_000}
        db = psycopg.connect(admin_url, autocommit=True)
        register_vector(db)
        # the product stores halfvec(1024) (migration 0015); the same vectors, loaded from
        # the same float32 values, into a table of the same layout as vector(1024)
        db.execute("CREATE TABLE bench_vector_entries (LIKE org_memory_entries INCLUDING ALL)")
        db.execute(
            "ALTER TABLE bench_vector_entries ALTER COLUMN embedding TYPE vector(1024)"
            " USING embedding::vector(1024)"
        )
        db.execute("ALTER TABLE bench_vector_entries ALTER COLUMN embedding SET STORAGE PLAIN")
        for tenant, size in sizes.items():
            lake.load(tenant, synthetic.organization(size, texts, pool_vectors, size))
            lake.load(
                f"vec-{tenant}",
                synthetic.organization(size, texts, pool_vectors, size),
                table="bench_vector_entries",
                vector_type="vector",
            )
        db.execute("VACUUM ANALYZE org_memory_entries")
        db.execute("VACUUM ANALYZE bench_vector_entries")
        db.execute(f"SET hnsw.ef_search = {int(HNSW_EF_SEARCH)}")
        db.execute("SET hnsw.iterative_scan = relaxed_order")
        for kind, (table, wrap, ops, prefix) in TYPES.items():
            row: dict[str, Any] = {}
            row["table_mb"] = round(
                db.execute(
                    "SELECT (pg_total_relation_size(%s::regclass) / 1048576.0)::float8", (table,)
                ).fetchone()[0],
                1,
            )  # type: ignore[index]

            def scan(tenant: str, table: str = table, wrap: Any = wrap) -> dict[str, float]:
                it = itertools.cycle(topics)
                query = (
                    f"SELECT entry_id FROM {table} WHERE tenant_id = %s"  # noqa: S608 - constant
                    f" ORDER BY embedding <=> %s LIMIT {LEG_LIMIT}"
                )
                return timed(
                    lambda: db.execute(query, (tenant, wrap(next(it)))).fetchall(), args.runs
                )

            db.execute("SET enable_indexscan = off")
            row["exact_scan_ms"] = {t: scan(prefix + t) for t in sizes}
            db.execute("RESET enable_indexscan")
            started = time.perf_counter()
            db.execute(
                f"CREATE INDEX {table}_bench_hnsw ON {table}"
                f" USING hnsw (embedding {ops}) WHERE tenant_id = '{prefix}org-50000'"
            )
            row["hnsw_build_s"] = round(time.perf_counter() - started, 1)
            row["hnsw_mb"] = round(
                db.execute(
                    "SELECT (pg_relation_size(%s::regclass) / 1048576.0)::float8",
                    (f"{table}_bench_hnsw",),
                ).fetchone()[0],
                1,
            )  # type: ignore[index]
            row["hnsw_scan_ms"] = scan(prefix + "org-50000")
            matrix = lake.matrices[prefix + "org-50000"]
            ids = lake.ids[prefix + "org-50000"]
            hits = 0
            for q in topics:
                want = {ids[i] for i in np.argsort(1.0 - matrix @ q)[:LEG_LIMIT]}
                got = db.execute(
                    f"SELECT entry_id FROM {table} WHERE tenant_id = '{prefix}org-50000'"  # noqa: S608
                    f" ORDER BY embedding <=> %s LIMIT {LEG_LIMIT}",
                    (wrap(q),),
                ).fetchall()
                hits += len(want & {r[0] for r in got})
            row["hnsw_recall_at_25"] = round(hits / (LEG_LIMIT * len(topics)), 4)
            report[kind] = row
            print(kind, json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
