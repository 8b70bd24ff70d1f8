"""A thousand organizations on one cluster (issue 16, item 2): at least a million rows in
one entries table, queries of a small, a medium and a large organization, writes, and
planning time, before and after the per-organization HNSW indexes exist.

The mix: 10 organizations of 50,000 entries, 50 of 5,000 and 940 of 20-500 (a
log-normal, median ~250) — 1,000 organizations, 1,011,620 rows (bench.synthetic, bulk
loaded as bench.query_scale loads them, vectors as halfvec). Measured, repository level
(topic embedding excluded), p50 / p95 / p99 ms: a 300-entry, a 5,000-entry and a
50,000-entry organization's search on the exact scan, then after `ensure_hnsw_indexes`
has given each of the 60 organizations past 2,000 entries its own partial HNSW index; an
incident with 5 corroborated findings written through the product; and the planning time
of the vector leg's statement for the 300-entry organization (EXPLAIN ... SUMMARY), with
no partial index on the table and with 60. With the indexes, the search in one call
(`grandbo_search`, issue 28) is also measured beside the six statements it replaced, in
alternation, directly and through PgBouncer in transaction mode, every search's two
answers compared field by field (bench.search_round_trip.measure).

    .venv/bin/python -m bench.thousand_orgs [--runs 200] [--json /tmp/thousand_orgs.json]
"""

from __future__ import annotations

import os

os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")

import argparse
import itertools
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector import HalfVector
from pgvector.psycopg import register_vector

from bench import synthetic
from bench.query_scale import (
    Lake,
    embedded_pool,
    incident_event,
    scratch_server,
    synthetic_topics,
    timed,
    timed_search,
)
from bench.search_round_trip import measure_both_paths
from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.embedding.local import LocalMiniLMProvider
from grandbo.local.embed_queue import InProcessEmbedQueue
from grandbo.memory.incidents import record_incident
from grandbo.memory.read.recall import LEG_LIMIT
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.repository.search import _VECTOR_LEG
from grandbo.memory.repository.vector_indexes import ensure_hnsw_indexes
from grandbo.memory.service import MemoryService
from grandbo.storage.connections import app_url_for, connect


def organization_sizes(seed: int = 3) -> dict[str, int]:
    rng = np.random.default_rng(seed)
    sizes = {f"large-{i:02d}": 50_000 for i in range(10)}
    sizes |= {f"medium-{i:02d}": 5_000 for i in range(50)}
    small = np.clip(rng.lognormal(mean=np.log(250), sigma=0.6, size=940), 20, 500)
    sizes |= {f"small-{i:03d}": int(n) for i, n in enumerate(small)}
    sizes["small-000"] = 300  # the one measured
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--data",
        type=Path,
        help="keep the database here and reuse it when loaded (the exact-scan phase is"
        " measured only before the HNSW indexes exist)",
    )
    parser.add_argument("--shared-buffers", default="1GB")
    args = parser.parse_args()
    provider = LocalMiniLMProvider()
    texts, pool_vectors = embedded_pool(provider)
    topics = synthetic_topics(provider)
    sizes = organization_sizes()
    total = sum(sizes.values())
    report: dict[str, Any] = {"organizations": len(sizes), "rows": total, "runs": args.runs}
    print(f"{len(sizes)} organizations, {total:,} rows", flush=True)
    with scratch_server(args.shared_buffers, keep=args.data) as admin_url:
        admin = psycopg.connect(admin_url, autocommit=True)
        register_vector(admin)
        loaded = admin.execute("SELECT count(*) FROM org_memory_tenants").fetchone()
        if loaded is None or loaded[0] != len(sizes):
            lake = Lake(admin_url, provider.embed_rev)
            started = time.perf_counter()
            for n, (tenant, size) in enumerate(sizes.items()):
                lake.load(tenant, synthetic.organization(size, texts, pool_vectors, n))
                lake.matrices.pop(tenant)  # a million vectors need not stay in memory
            lake.analyze()
            report["load_s"] = round(time.perf_counter() - started, 1)
            print(f"loaded in {report['load_s']} s", flush=True)
        indexed_already = admin.execute(
            "SELECT count(*) FROM pg_indexes"  # on the partitions (migration 0016)
            " WHERE indexname LIKE 'org\\_memory\\_entries\\_hnsw\\_%%'"
        ).fetchone()
        # sizes in GB: the entries' partitions with their indexes (the partitioned parent
        # holds no rows of its own), the postings with theirs, the whole database
        sizes = admin.execute(
            "SELECT (SELECT sum(pg_total_relation_size(inhrelid)) FROM pg_inherits"
            "        WHERE inhparent = 'org_memory_entries'::regclass) / 1073741824.0,"
            " pg_total_relation_size('org_memory_tag_postings') / 1073741824.0,"
            " pg_database_size(current_database()) / 1073741824.0"
        ).fetchone()
        assert sizes is not None
        report["entries_gb"], report["postings_gb"], report["database_gb"] = (
            round(float(size), 2) for size in sizes
        )
        repository = MemoryRepository(connect(app_url_for(admin_url)))

        def planning_ms(tenant: str) -> dict[str, float]:
            samples = []
            for vector, _ in topics * 5:
                plan = admin.execute(
                    "EXPLAIN (ANALYZE, SUMMARY, FORMAT JSON) " + _VECTOR_LEG,
                    {
                        "q": HalfVector(vector),
                        "tenant": tenant,
                        "rev": provider.embed_rev,
                        "services": None,
                        "cutoff": provider.vector_cutoff,
                        "limit": LEG_LIMIT,
                        "now": None,
                    },
                ).fetchone()[0][0]  # type: ignore[index]
                samples.append(float(plan["Planning Time"]))
            ordered = sorted(samples)
            return {
                "p50": round(statistics.median(ordered), 3),
                "p95": round(ordered[int(0.95 * len(ordered))], 3),
            }

        measured = {
            "small (300)": "small-000",
            "medium (5,000)": "medium-00",
            "large (50,000)": "large-00",
        }
        phases = ("exact scan", "per-organization HNSW")
        for phase in phases[1:] if indexed_already and indexed_already[0] else phases:
            if phase == "per-organization HNSW":
                started = time.perf_counter()
                indexed = ensure_hnsw_indexes(admin_url)
                report["hnsw_indexes"] = len(indexed)
                report["hnsw_build_s"] = round(time.perf_counter() - started, 1)
                admin.execute("ANALYZE org_memory_entries")
                print(f"{len(indexed)} HNSW indexes in {report['hnsw_build_s']} s", flush=True)
            row = {
                name: timed_search(repository, tenant, provider, topics, args.runs)
                for name, tenant in measured.items()
            }
            row["planning, vector leg of the 300-entry organization"] = planning_ms("small-000")
            report[phase] = row
            print(phase, json.dumps(row), flush=True)
        report["one call beside six statements"] = measure_both_paths(
            admin_url, measured, provider, topics, args.runs
        )

        writer = MemoryService(
            MemoryRepository(connect(app_url_for(admin_url))),
            FakeEmbeddingProvider(),
            embed_queue=InProcessEmbedQueue(),
        )
        counter = itertools.count()
        run = f"{time.time_ns():x}"  # new incidents on a kept database, never replays

        def incident() -> None:
            record_incident(writer, incident_event(texts, "medium-01", next(counter), run))

        report["write_incident_5_findings_ms"] = timed(incident, args.runs)
        print("write", report["write_incident_5_findings_ms"], flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=float))


if __name__ == "__main__":
    main()
