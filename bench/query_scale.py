"""Query, write and embed performance at seed scale and beyond, each beside a baseline.

Scenarios on a throwaway embedded PostgreSQL (the local provider embeds the topics and a
pool of incident texts; entries carry pool vectors plus noise, see bench.synthetic):

1. seed scale: 20 organizations x 5,000 entries (100,000 rows) — repository-level hybrid
   query latency (topic embedding excluded) with every organization on the exact scan,
   then as the product runs them (`grandbo index`: an HNSW index per organization past
   HNSW_MIN_ENTRIES), and end to end through the query handler;
2. one organization of 50,000 entries — exact scan, then its own HNSW index (iterative
   scan), with the vector leg's recall against the exact top 25;
3. 500,000 rows in total (every organization indexed as the product would) — again;
and beside them: the numpy floor (an exact scan of the same vectors in memory), the
naive layout (default TOASTed `vector(1024)` storage) against the tuned one (PLAIN),
write latency of an incident with 5 corroborated findings, and backfill throughput.

Bulk loading writes with COPY as the schema owner, straight into what the queries read
(entries and tag statistics); everything measured goes through the product's code.

Run: `.venv/bin/python -m bench.query_scale [--quick] [--plot docs/bench_query_latency.png]`
"""

from __future__ import annotations

import os

# before anything imports powertools: its Metrics read these when they are created
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")

import argparse
import itertools
import json
import random
import shutil
import statistics
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector import HalfVector
from pgvector.psycopg import register_vector
from psycopg import sql

from bench import synthetic
from grandbo.embedding.base import EmbeddingProvider, render_entry_text
from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.embedding.local import LocalMiniLMProvider
from grandbo.local.embed_queue import InProcessEmbedQueue
from grandbo.local.postgres import start_embedded_postgres, stop_embedded_postgres
from grandbo.memory.incidents import IncidentClosed, record_incident
from grandbo.memory.read.recall import LEG_LIMIT
from grandbo.memory.repository import MemoryRepository, SearchLegs
from grandbo.memory.repository.postings import title_flags
from grandbo.memory.repository.vector_indexes import HNSW_MIN_ENTRIES, ensure_hnsw_indexes
from grandbo.memory.service import MemoryService
from grandbo.migrations import migrate
from grandbo.storage.connections import app_url_for, connect
from grandbo.text.tags import tokenize

COLUMNS = (
    "tenant_id, entry_id, title, summary, tags, service, origin, status, revision,"
    " created_at, updated_at, embedding, embed_rev, embedded_revision, embedded_at"
)


@contextmanager
def scratch_server(shared_buffers: str = "1GB", keep: Path | None = None) -> Iterator[str]:
    """A throwaway embedded PostgreSQL with `shared_buffers` and the product's schema: its
    admin URL; stopped and deleted on exit (with `keep`, its data lives there, is reused
    when present and is kept)."""
    scratch = keep or Path(tempfile.mkdtemp(prefix="grandbo-bench-"))
    try:
        admin_url = start_embedded_postgres(scratch)
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(sql.Literal(shared_buffers))
            )
        stop_embedded_postgres(scratch)
        admin_url = start_embedded_postgres(scratch)
        migrate(admin_url)
        yield admin_url
    finally:
        stop_embedded_postgres(scratch)
        if keep is None:
            shutil.rmtree(scratch, ignore_errors=True)


def embedded_pool(provider: EmbeddingProvider) -> tuple[list[tuple[str, str, str]], np.ndarray]:
    """The synthetic pool of 1,500 incident texts and their vectors (bench.synthetic)."""
    texts = synthetic.pool(1_500)
    vectors = provider.embed([render_entry_text(t, s, svc) for svc, t, s in texts])
    return texts, np.asarray(vectors, dtype=np.float32)


def synthetic_topics(provider: EmbeddingProvider, count: int = 40) -> list[tuple[Any, list[str]]]:
    """The benchmarks' topics (bench.synthetic, seed 5): each one's vector and its tags."""
    rng = random.Random(5)
    texts = [synthetic.topic_text(rng) for _ in range(count)]
    return list(zip(provider.embed(texts), [tokenize(t) for t in texts], strict=True))


def incident_event(
    texts: list[tuple[str, str, str]], tenant: str, n: int, run: str = ""
) -> IncidentClosed:
    """The `n`th benchmark incident of `tenant`: 5 corroborated findings from the pool.
    `run` names the incidents of one run apart: on a kept database, `INC-n` of an earlier
    run is a replay (answered from its idempotency keys), not a write."""
    return IncidentClosed.model_validate(
        {
            "tenant_id": tenant,
            "incident_id": f"INC-{run}-{n}" if run else f"INC-{n}",
            "title": "Checkout errors",
            "service": "checkout-api",
            "closed_at": "2026-11-29T10:00:00Z",
            "findings": [
                {
                    "finding_id": f"f{i}",
                    "status": "corroborated",
                    "title": texts[(n * 5 + i) % len(texts)][1],
                    "summary": texts[(n * 5 + i) % len(texts)][2],
                }
                for i in range(5)
            ],
        }
    )


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def pick(p: float) -> float:
        return ordered[min(len(ordered) - 1, int(p * len(ordered)))]

    return {
        "p50": round(statistics.median(ordered), 2),
        "p95": round(pick(0.95), 2),
        "p99": round(pick(0.99), 2),
    }


def timed(fn: Callable[[], object], runs: int) -> dict[str, float]:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return percentiles(samples)


def search_once(
    repository: MemoryRepository,
    tenant: str,
    provider: EmbeddingProvider,
    vector: Any,
    tags: list[str],
) -> SearchLegs:
    """One repository search as the service runs it, with the benchmarks' settings."""
    return repository.search(
        tenant,
        topic_tags=tags,
        topic_vector=vector,
        embed_rev=provider.embed_rev,
        vector_cutoff=provider.vector_cutoff,
        services=None,
        leg_limit=LEG_LIMIT,
    )


def timed_search(
    repository: MemoryRepository,
    tenant: str,
    provider: EmbeddingProvider,
    topics: list[tuple[Any, list[str]]],
    runs: int,
    warm: int = 1,
) -> dict[str, float]:
    """`tenant`'s repository search (topic embedding excluded) over the topics in turn,
    `warm` times unmeasured, then `runs` times: p50 / p95 / p99 ms."""
    it = itertools.cycle(topics)

    def one() -> None:
        vector, tags = next(it)
        search_once(repository, tenant, provider, vector, tags)

    for _ in range(warm):
        one()
    return timed(one, runs)


class Lake:
    """The throwaway database and the bulk loader."""

    def __init__(self, admin_url: str, embed_rev: str) -> None:
        self.admin_url = admin_url
        self.embed_rev = embed_rev
        self.admin = psycopg.connect(admin_url, autocommit=True)
        register_vector(self.admin)
        self.matrices: dict[str, np.ndarray] = {}
        self.ids: dict[str, list[uuid.UUID]] = {}

    def load(
        self,
        tenant: str,
        rows: Iterable[tuple[synthetic.SyntheticEntry, np.ndarray]],
        table: str = "org_memory_entries",
        vector_type: str = "halfvec",  # the product's column type (migration 0015)
    ) -> None:
        now = datetime.now(UTC)
        doc_freq: Counter[str] = Counter()
        vectors, ids, total_tags = [], [], 0
        postings: list[tuple[str, uuid.UUID, int, str, bool]] = []
        with self.admin.cursor() as cur:
            copy_sql = f"COPY {table} ({COLUMNS}) FROM STDIN WITH (FORMAT BINARY)"
            with cur.copy(copy_sql) as copy:
                copy.set_types(
                    [
                        "text",
                        "uuid",
                        "text",
                        "text",
                        "text[]",
                        "text",
                        "text",
                        "text",
                        "int4",
                        "timestamptz",
                        "timestamptz",
                        vector_type,
                        "text",
                        "int4",
                        "timestamptz",
                    ]
                )
                for item, vector in rows:
                    tags = tokenize(f"{item.title}\n{item.summary}\n{item.service}")
                    doc_freq.update(set(tags))
                    total_tags += len(set(tags))
                    flags = title_flags(item.title, tags)  # as the product's write path
                    postings.extend(
                        (tag, item.entry_id, len(flags), item.service, in_title)
                        for tag, in_title in flags
                    )
                    copy.write_row(
                        (
                            tenant,
                            item.entry_id,
                            item.title,
                            item.summary,
                            tags,
                            item.service,
                            "incident",
                            "active",
                            1,
                            now,
                            now,
                            HalfVector(vector) if vector_type == "halfvec" else vector,
                            self.embed_rev,
                            1,
                            now,
                        )
                    )
                    vectors.append(vector)
                    ids.append(item.entry_id)
            if table == "org_memory_entries":
                cur.execute("INSERT INTO org_memory_tenants (tenant_id) VALUES (%s)", (tenant,))
                cur.execute(
                    "INSERT INTO org_memory_tenant_stats VALUES (%s, %s, %s)",
                    (tenant, len(ids), total_tags),
                )
                with cur.copy(
                    "COPY org_memory_tag_stats (tenant_id, tag, doc_count) FROM STDIN"
                ) as copy:
                    for tag, count in doc_freq.items():
                        copy.write_row((tenant, tag, count))
                with cur.copy(
                    "COPY org_memory_tag_postings (tenant_id, tag, entry_id, tag_count, service,"
                    " updated_at, in_title) FROM STDIN"
                ) as copy:
                    for row in postings:
                        tag, entry_id, count, service, in_title = row
                        copy.write_row((tenant, tag, entry_id, count, service, now, in_title))

        self.matrices[tenant] = np.vstack(vectors)
        self.ids[tenant] = ids

    def analyze(self) -> None:
        self.admin.execute("VACUUM ANALYZE org_memory_entries")
        self.admin.execute("ANALYZE org_memory_tag_stats")
        self.admin.execute("VACUUM ANALYZE org_memory_tag_postings")


def numpy_floor(matrix: np.ndarray, topics: list[np.ndarray], runs: int) -> dict[str, float]:
    it = itertools.cycle(topics)

    def scan() -> None:
        distances = 1.0 - matrix @ next(it)
        top = np.argpartition(distances, LEG_LIMIT)[:LEG_LIMIT]
        top[np.argsort(distances[top])]

    return timed(scan, runs)


def exact_top(
    matrix: np.ndarray, ids: list[uuid.UUID], q: np.ndarray, cutoff: float
) -> list[uuid.UUID]:
    distances = 1.0 - matrix @ q
    order = np.argsort(distances)[:LEG_LIMIT]
    return [ids[i] for i in order if distances[i] < cutoff]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="1/10 of every size (smoke run)")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--plot", default="docs/bench_query_latency.png")
    parser.add_argument("--json", default="docs/bench_query_scale.json")
    parser.add_argument(
        "--shared-buffers",
        default="1GB",
        help="the server's shared_buffers for this run ('' keeps the default)",
    )
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    seed_orgs, seed_size, big_size, total = 20, 5_000 // scale, 50_000 // scale, 500_000 // scale
    report: dict[str, Any] = {"machine": "2-core development VM", "quick": args.quick}

    provider = LocalMiniLMProvider()
    texts = synthetic.pool(1_500)
    started = time.perf_counter()
    pool_vectors = np.asarray(
        provider.embed([render_entry_text(t, s, svc) for svc, t, s in texts]), dtype=np.float32
    )
    report["pool_embed_texts_per_s"] = round(len(texts) / (time.perf_counter() - started), 1)
    rng = random.Random(5)
    topic_texts = [synthetic.topic_text(rng) for _ in range(40)]
    topic_vectors = [np.asarray(v, dtype=np.float32) for v in provider.embed(topic_texts)]
    topic_tags = [tokenize(t) for t in topic_texts]

    scratch = Path(tempfile.mkdtemp(prefix="grandbo-bench-scale-"))
    try:
        admin_url = start_embedded_postgres(scratch)
        if args.shared_buffers:
            # the embedded server's default (128 MB) cannot hold a 500 MB table; Aurora
            # sizes its buffer cache from the instance's memory
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(
                    sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(
                        sql.Literal(args.shared_buffers)
                    )
                )
            stop_embedded_postgres(scratch)
            admin_url = start_embedded_postgres(scratch)
        report["shared_buffers"] = args.shared_buffers or "128MB (default)"
        migrate(admin_url)
        lake = Lake(admin_url, provider.embed_rev)
        app = connect(app_url_for(admin_url))
        repository = MemoryRepository(app)

        def repo_query(tenant: str) -> dict[str, float]:
            it = itertools.cycle(list(zip(topic_vectors, topic_tags, strict=True)))

            def one() -> None:
                vector, tags = next(it)
                repository.search(
                    tenant,
                    topic_tags=tags,
                    topic_vector=vector.tolist(),
                    embed_rev=provider.embed_rev,
                    vector_cutoff=provider.vector_cutoff,
                    services=None,
                    leg_limit=LEG_LIMIT,
                )

            return timed(one, args.runs)

        def vector_recall(tenant: str) -> float:
            hits, wanted = 0, 0
            for vector in topic_vectors:
                legs = repository.search(
                    tenant,
                    topic_tags=[],
                    topic_vector=vector.tolist(),
                    embed_rev=provider.embed_rev,
                    vector_cutoff=provider.vector_cutoff,
                    services=None,
                    leg_limit=LEG_LIMIT,
                )
                got = {c.entry_id for c in legs.vector}
                want = exact_top(
                    lake.matrices[tenant], lake.ids[tenant], vector, provider.vector_cutoff
                )
                hits += len(got & set(want))
                wanted += len(want)
            return round(hits / wanted, 4) if wanted else 1.0

        # 1. seed scale -------------------------------------------------------------------
        started = time.perf_counter()
        for org in range(seed_orgs):
            lake.load(
                f"seed-{org:02d}", synthetic.organization(seed_size, texts, pool_vectors, org)
            )
        lake.analyze()
        report["load_seed_s"] = round(time.perf_counter() - started, 1)
        curve: dict[int, dict[str, Any]] = {}
        for size in (seed_size // 5, seed_size * 4):
            lake.load(
                f"curve-{size}", synthetic.organization(size, texts, pool_vectors, 100 + size)
            )
        lake.analyze()
        for tenant, size in (
            (f"curve-{seed_size // 5}", seed_size // 5),
            ("seed-00", seed_size),
            (f"curve-{seed_size * 4}", seed_size * 4),
        ):
            curve[size] = {
                "exact": repo_query(tenant),
                "numpy_floor": numpy_floor(lake.matrices[tenant], topic_vectors, args.runs),
            }
        report["seed_scale"] = {
            "rows_in_table": seed_orgs * seed_size + seed_size // 5 + seed_size * 4,
            "repository_hybrid_exact_scan_ms": curve[seed_size]["exact"],
            "numpy_floor_ms": curve[seed_size]["numpy_floor"],
        }

        # naive layout: the same org in a table with default (TOASTed) vector storage
        lake.admin.execute(
            "CREATE TABLE bench_naive_entries (LIKE org_memory_entries INCLUDING DEFAULTS)"
        )
        lake.admin.execute(
            "ALTER TABLE bench_naive_entries ALTER COLUMN embedding SET STORAGE EXTENDED"
        )
        lake.load(
            "naive",
            synthetic.organization(seed_size, texts, pool_vectors, 0),
            table="bench_naive_entries",
        )
        lake.admin.execute("ANALYZE bench_naive_entries")

        def raw_vector_scan(table: str, tenant: str) -> dict[str, float]:
            it = itertools.cycle(topic_vectors)
            query = (
                f"SELECT entry_id, embedding <=> %s AS d FROM {table}"  # noqa: S608 - bench tables
                " WHERE tenant_id = %s ORDER BY d LIMIT 25"
            )
            return timed(
                lambda: lake.admin.execute(query, (next(it), tenant)).fetchall(), args.runs
            )

        report["layout_vector_scan_ms"] = {
            "naive_toasted_vector": raw_vector_scan("bench_naive_entries", "naive"),
            "tuned_plain_vector": raw_vector_scan("org_memory_entries", "seed-00"),
        }

        # as the product runs: `grandbo index` gives each organization past the threshold
        # its own HNSW index
        started = time.perf_counter()
        indexed = ensure_hnsw_indexes(admin_url, min_entries=HNSW_MIN_ENTRIES // scale)
        lake.admin.execute("ANALYZE org_memory_entries")
        report["seed_scale"]["hnsw_indexes_built"] = len(indexed)
        report["seed_scale"]["hnsw_build_s"] = round(time.perf_counter() - started, 1)
        for tenant, size in (("seed-00", seed_size), (f"curve-{seed_size * 4}", seed_size * 4)):
            curve[size]["hnsw"] = repo_query(tenant)
        report["seed_scale"]["repository_hybrid_ms"] = curve[seed_size]["hnsw"]
        report["seed_scale"]["vector_leg_recall_vs_exact"] = vector_recall("seed-00")

        # end to end through the query handler, local provider embedding the topic
        from functions.query_api.handler import lambda_handler as query_handler

        from grandbo.local.runner import lambda_context, proxy_event
        from grandbo.runtime.lambda_container import (
            LambdaEnvironment,
            LambdaRuntime,
            install_runtime,
        )

        install_runtime(
            LambdaRuntime(
                LambdaEnvironment.model_validate(
                    {"DATABASE_URL": app_url_for(admin_url), "GRANDBO_EMBEDDING_PROVIDER": "local"}
                ),
                provider=provider,
            )
        )
        it_topics = itertools.cycle(topic_texts)

        def through_handler() -> None:
            body = json.dumps({"topic": next(it_topics), "limit": 5}).encode()
            event = proxy_event(
                "POST",
                "/v1/memory/query",
                {"Content-Type": "application/json"},
                body,
                authorizer={"tenant_id": "seed-00"},
            )
            response = query_handler(event, lambda_context("bench-query"))
            assert response["statusCode"] == 200, response

        report["seed_scale"]["handler_end_to_end_ms"] = timed(through_handler, args.runs)
        report["seed_scale"]["topic_embedding_ms"] = timed(
            lambda: provider.embed_one(next(it_topics)), args.runs
        )

        # 2. one organization of 50,000 ---------------------------------------------------
        started = time.perf_counter()
        lake.load("big", synthetic.organization(big_size, texts, pool_vectors, 999))
        lake.analyze()
        report["load_big_s"] = round(time.perf_counter() - started, 1)
        big_exact = repo_query("big")
        started = time.perf_counter()
        ensure_hnsw_indexes(admin_url, min_entries=big_size)
        report["hnsw_build_s"] = round(time.perf_counter() - started, 1)
        lake.admin.execute("ANALYZE org_memory_entries")
        report["one_big_org"] = {
            "entries": big_size,
            "repository_hybrid_exact_ms": big_exact,
            "repository_hybrid_hnsw_ms": repo_query("big"),
            "numpy_floor_ms": numpy_floor(lake.matrices["big"], topic_vectors, args.runs),
            "vector_leg_recall_vs_exact": vector_recall("big"),
        }
        curve[big_size] = {
            "exact": big_exact,
            "hnsw": report["one_big_org"]["repository_hybrid_hnsw_ms"],
            "numpy_floor": report["one_big_org"]["numpy_floor_ms"],
        }

        # 3. 500,000 rows in total ---------------------------------------------------------
        loaded = seed_orgs * seed_size + seed_size // 5 + seed_size * 4 + big_size
        started = time.perf_counter()
        org = 0
        while loaded < total:
            size = min(seed_size, total - loaded)
            lake.load(
                f"fill-{org:03d}", synthetic.organization(size, texts, pool_vectors, 5000 + org)
            )
            loaded += size
            org += 1
        lake.analyze()
        report["load_fill_s"] = round(time.perf_counter() - started, 1)
        started = time.perf_counter()
        report["fill_hnsw_indexes_built"] = len(
            ensure_hnsw_indexes(admin_url, min_entries=HNSW_MIN_ENTRIES // scale)
        )
        lake.admin.execute("ANALYZE org_memory_entries")
        report["fill_hnsw_build_s"] = round(time.perf_counter() - started, 1)
        report["total_500k"] = {
            "rows_in_table": loaded,
            "seed_org_repository_hybrid_ms": repo_query("seed-00"),
            "big_org_repository_hybrid_hnsw_ms": repo_query("big"),
        }

        # writes and embedding throughput --------------------------------------------------
        def write_service(p: EmbeddingProvider) -> MemoryService:
            return MemoryService(MemoryRepository(app), p, embed_queue=InProcessEmbedQueue())

        writer = write_service(FakeEmbeddingProvider())
        counter = iter(range(10**9))

        def incident() -> None:
            record_incident(writer, incident_event(texts, "writes", next(counter)))

        report["write_incident_5_findings_ms"] = timed(incident, args.runs)

        class Stub(FakeEmbeddingProvider):
            """Isolates the database cost: one precomputed vector for every text."""

            def _embed(self, batch: list[str]) -> list[list[float]]:
                return [pool_vectors[0].tolist()] * len(batch)

        for name, prov, count in (
            ("stub", Stub(model_id="stub"), 5_000 // scale),
            ("local", provider, 500 // scale),
        ):
            svc = write_service(prov)
            tenant = f"embed-{name}"
            for i in range(count):
                svc_name, title, summary = texts[i % len(texts)]
                svc.record_entry(
                    tenant,
                    {"title": title, "summary": summary, "service": svc_name},
                    _ctx(f"{name}-{i}"),
                )
            started = time.perf_counter()
            stored = svc.embed_pending(tenant)
            elapsed = time.perf_counter() - started
            report[f"backfill_{name}_entries_per_s"] = round(stored / elapsed, 1)
        app.close()
    finally:
        stop_embedded_postgres(scratch)
        shutil.rmtree(scratch, ignore_errors=True)

    report["curve"] = {str(k): v for k, v in sorted(curve.items())}
    Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    plot(curve, Path(args.plot))


def _ctx(key: str) -> Any:
    from grandbo.memory.domain.models import WriteContext

    return WriteContext(actor="bench", idempotency_key=key)


def plot(curve: dict[int, dict[str, Any]], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot (pip install matplotlib)")
        return
    sizes = sorted(curve)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for key, label in (
        ("exact", "hybrid query, exact vector scan (p95)"),
        ("numpy_floor", "numpy exact scan in memory (p95)"),
    ):
        ax.plot(sizes, [curve[s][key]["p95"] for s in sizes], marker="o", label=label)
    hnsw = [s for s in sizes if "hnsw" in curve[s]]
    ax.plot(
        hnsw,
        [curve[s]["hnsw"]["p95"] for s in hnsw],
        marker="s",
        label="hybrid query, HNSW + iterative scan (p95)",
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("active entries in the organization")
    ax.set_ylabel("latency (ms, repository level)")
    ax.set_title("Grandbo query latency vs organization size (2 cores)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


if __name__ == "__main__":
    main()
