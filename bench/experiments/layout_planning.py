"""What the vector layout costs every statement on the entries table: planning time as
the number of per-organization HNSW indexes grows, in one table and hash-partitioned by
organization (issue 16, item 2: "does planning time grow with their number?").

Planning depends on the schema, not on the data, so the table here is small: a
300-entry organization (bench.synthetic, bulk loaded as bench.query_scale loads them)
beside K organizations of 3 entries, each with its own partial HNSW index as
`grandbo.memory.repository.vector_indexes` builds them. Measured: the planning time (EXPLAIN ...
SUMMARY, as the application role inside its tenant scope, p50 of 200) of the three
statements on entries a search of the 300-entry organization runs — the vector leg, the
entries by id with their distances (50), the coverage count — summed, and one
search's wall time (repository level, topic embedding excluded, p50 / p95), for:

- one table (the layout before migration 0016) with K = 0, 60, 250 and 1,000 partial indexes;
- the same rows in a table hash-partitioned by organization into P partitions (P = 16,
  the product's layout since migration 0016, and 64), each organization's partial index
  on its own partition, with K = 60 and 1,000.

    .venv/bin/python -m bench.experiments.layout_planning [--runs 200] [--json /tmp/layout.json]
"""

from __future__ import annotations

import os

os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")

import argparse
import json
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.rows import dict_row

from bench import synthetic
from bench.query_scale import Lake, embedded_pool, scratch_server, synthetic_topics, timed_search
from grandbo.embedding.local import LocalMiniLMProvider
from grandbo.memory.read.recall import LEG_LIMIT
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.repository.search import _ENTRIES_WITH_DISTANCE, _VECTOR_LEG
from grandbo.memory.repository.vector_indexes import (
    COSINE_OPS,
    HNSW_EF_CONSTRUCTION,
    HNSW_M,
    index_name,
)
from grandbo.memory.repository.vectors import stored
from grandbo.storage.connections import app_url_for, connect

MEASURED = "small-000"
INDEX_COUNTS = (0, 60, 250, 1_000)
PARTITIONED_COUNTS = (60, 1_000)
_COVERAGE = (
    "SELECT count(*) FROM org_memory_entries WHERE tenant_id = %(tenant)s AND status = 'active'"
    " AND (embed_rev IS NULL OR embed_rev < %(rev)s OR embed_rev > %(rev)s)"
)


def add_indexes(admin: psycopg.Connection[Any], tenants: list[str]) -> None:
    """Each tenant's partial HNSW index, on the partition that holds it if partitioned."""
    for tenant in tenants:
        row = admin.execute(
            "SELECT tableoid::regclass::text FROM org_memory_entries WHERE tenant_id = %s LIMIT 1",
            (tenant,),
        ).fetchone()
        assert row is not None
        admin.execute(
            sql.SQL(
                "CREATE INDEX IF NOT EXISTS {name} ON {table} USING hnsw (embedding {ops})"
                " WITH (m = {m}, ef_construction = {ef}) WHERE tenant_id = {tenant}"
            ).format(
                name=sql.Identifier(index_name(tenant)),
                table=sql.Identifier(row[0]),
                ops=sql.SQL(COSINE_OPS),
                m=sql.Literal(HNSW_M),
                ef=sql.Literal(HNSW_EF_CONSTRUCTION),
                tenant=sql.Literal(tenant),
            )
        )


def relayout(admin: psycopg.Connection[Any], partitions: int | None) -> None:
    """Rebuild the entries table as one table (`partitions` None) or hash-partitioned by
    organization: the same columns, constraints, storage, indexes (the HNSW ones left
    out), row-level security and grants."""
    indexdefs = [
        row[0].replace(" ON ONLY ", " ON ")
        for row in admin.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = 'org_memory_entries'"
            " AND indexdef NOT LIKE '%%hnsw%%'"
        )
    ]
    admin.execute(
        sql.SQL(
            "CREATE TABLE entries_relaid (LIKE org_memory_entries INCLUDING DEFAULTS"
            " INCLUDING CONSTRAINTS INCLUDING STORAGE){}"
        ).format(sql.SQL("" if partitions is None else " PARTITION BY HASH (tenant_id)"))
    )
    for n in range(partitions or 0):
        admin.execute(
            sql.SQL(
                "CREATE TABLE {} PARTITION OF entries_relaid"
                " FOR VALUES WITH (MODULUS {}, REMAINDER {})"
            ).format(
                sql.Identifier(f"entries_{partitions}_p{n:02d}"),
                sql.Literal(partitions),
                sql.Literal(n),
            )
        )
    # migration 0005: rows stay whole (a partitioned table stores nothing: each partition)
    for table in [f"entries_{partitions}_p{n:02d}" for n in range(partitions or 0)] or [
        "entries_relaid"
    ]:
        admin.execute(
            sql.SQL("ALTER TABLE {} SET (toast_tuple_target = 8160)").format(sql.Identifier(table))
        )
    admin.execute("INSERT INTO entries_relaid SELECT * FROM org_memory_entries")
    admin.execute("DROP TABLE org_memory_entries CASCADE")
    admin.execute("ALTER TABLE entries_relaid RENAME TO org_memory_entries")
    for definition in indexdefs:
        admin.execute(definition)
    admin.execute("ALTER TABLE org_memory_entries ENABLE ROW LEVEL SECURITY")
    admin.execute("ALTER TABLE org_memory_entries FORCE ROW LEVEL SECURITY")
    admin.execute(
        "CREATE POLICY tenant_isolation ON org_memory_entries"
        " USING (tenant_id = grandbo_current_tenant())"
        " WITH CHECK (tenant_id = grandbo_current_tenant())"
    )
    admin.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON org_memory_entries TO grandbo_app")
    admin.execute("ANALYZE org_memory_entries")


@contextmanager
def scoped(app: psycopg.Connection[Any]) -> Iterator[psycopg.Cursor[Any]]:
    with app.transaction(), app.cursor(row_factory=dict_row) as cur:
        cur.execute("SELECT set_config('grandbo.tenant_id', %s, true)", (MEASURED,))
        yield cur


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    provider = LocalMiniLMProvider()
    texts, pool_vectors = embedded_pool(provider)
    topics = synthetic_topics(provider)
    others = [f"org-{n:04d}" for n in range(max(INDEX_COUNTS))]
    report: dict[str, Any] = {"runs": args.runs, "layouts": {}}
    with scratch_server("256MB") as admin_url:
        lake = Lake(admin_url, provider.embed_rev)
        lake.load(MEASURED, synthetic.organization(300, texts, pool_vectors, 0))
        for n, tenant in enumerate(others):
            lake.load(tenant, synthetic.organization(3, texts, pool_vectors, n + 1))
        lake.analyze()
        admin = psycopg.connect(admin_url, autocommit=True)
        register_vector(admin)
        app = psycopg.connect(app_url_for(admin_url), autocommit=True, prepare_threshold=None)
        register_vector(app)
        repository = MemoryRepository(connect(app_url_for(admin_url)))
        ids = lake.ids[MEASURED]
        vector, _ = topics[0]
        params = {
            "q": stored(vector),
            "tenant": MEASURED,
            "rev": provider.embed_rev,
            "services": None,
            "cutoff": provider.vector_cutoff,
            "limit": LEG_LIMIT,
            "now": None,
            "ids": ids[:50],
        }
        statements: dict[str, tuple[Any, Any]] = {
            "vector leg": (_VECTOR_LEG, params),
            "entries by id, with distances": (_ENTRIES_WITH_DISTANCE, params),
            "coverage": (_COVERAGE, params),
        }

        explain = sql.SQL("EXPLAIN (ANALYZE, SUMMARY, FORMAT JSON) ")

        def planning() -> dict[str, float]:
            out = {}
            for name, (query, bound) in statements.items():
                samples = []
                for _ in range(args.runs):
                    with scoped(app) as cur:
                        statement = sql.SQL(query) if isinstance(query, str) else query
                        cur.execute(explain + statement, bound)
                        row = cur.fetchone()
                        assert row is not None
                        samples.append(float(row["QUERY PLAN"][0]["Planning Time"]))
                out[name] = round(statistics.median(samples), 3)
            out["sum"] = round(sum(out.values()), 3)
            return out

        def measure(layout: str, count: int) -> None:
            started = time.perf_counter()
            add_indexes(admin, others[:count])
            admin.execute("ANALYZE org_memory_entries")
            row = {
                "indexes built_s": round(time.perf_counter() - started, 1),
                "planning_ms": planning(),
                "search_ms": timed_search(
                    repository, MEASURED, provider, topics, args.runs, warm=20
                ),
            }
            report["layouts"][f"{layout}, {count} partial HNSW indexes"] = row
            print(f"{layout:>22}, {count:>5} indexes:", json.dumps(row), flush=True)

        relayout(admin, None)
        for count in INDEX_COUNTS:
            measure("one table", count)
        for partitions in (16, 64):
            relayout(admin, partitions)
            for count in PARTITIONED_COUNTS:
                measure(f"{partitions} hash partitions", count)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
