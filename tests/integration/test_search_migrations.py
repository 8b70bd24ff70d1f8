"""Issue 28 (from its break-it pass): a database at 0021/0022/0023 moving to the latest while an
application connection (its backend's cached function and plans) stays open, and the
fallbacks of code that runs ahead of its migration; the pooler's shared backend."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.memory.read.recall import LEG_LIMIT
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.repository.vector_indexes import ensure_hnsw_indexes
from grandbo.memory.service import MemoryService
from grandbo.migrations import available_migrations, migrate
from grandbo.storage.connections import DatabaseUrls, connect
from grandbo.text.tags import tokenize

from .helpers import context, database_at, entry
from .search_comparison import comparable
from .test_transaction_pooler import CLEAN, backend_pid, carried_over

TOPICS = [
    "checkout requests time out waiting for a database connection from the pool",
    "kafka consumer lag after a broker restart",
    "dns resolver cache served stale records",
]


def _fill(service: MemoryService, tenant: str, n: int) -> None:
    for i in range(n):
        t = TOPICS[i % len(TOPICS)]
        service.record_entry(
            tenant, entry(f"{t} case {i}", f"{t}; seen in incident {i}"), context()
        )
    service.embed_pending(tenant)


def _compare_all(repo: MemoryRepository, tenant: str, fake: FakeEmbeddingProvider) -> None:
    for topic in TOPICS:
        for services in (None, ["nope"]):
            s: dict[str, Any] = {
                "topic_tags": tokenize(topic),
                "topic_vector": fake.embed([topic])[0],
                "embed_rev": fake.embed_rev,
                "vector_cutoff": 2.0,
                "services": services,
                "leg_limit": LEG_LIMIT,
                "now": None,
                "probe": [],
            }
            left, right = comparable(repo.search_statements(tenant, **s), repo.search(tenant, **s))
            assert left == right


@pytest.mark.parametrize("version", [21, 22, 23, 40])
def test_an_open_connection_across_the_migrations_to_the_latest(
    database: DatabaseUrls,
    admin_conn: psycopg.Connection[Any],
    tenant: str,
    version: int,
) -> None:
    fake = FakeEmbeddingProvider(duplicate_distance=0.5)
    with database_at(database, admin_conn, version) as urls:
        conn = connect(urls.app)
        try:
            repo = MemoryRepository(conn)
            service = MemoryService(repo, fake)
            _fill(service, tenant, 60)
            ensure_hnsw_indexes(urls.admin, min_entries=30)
            _compare_all(repo, tenant, fake)
            with psycopg.connect(urls.admin, autocommit=True) as own:
                ids = [
                    r[0]
                    for r in own.execute(
                        "SELECT entry_id FROM org_memory_entries WHERE tenant_id = %s"
                        " ORDER BY entry_id LIMIT 10",
                        (tenant,),
                    ).fetchall()
                ]
            assert len(ids) == 10
            before_hits = [h.entry_id for h in service.query_org_memory(tenant, TOPICS[0]).hits]
            before = repo.distances_between(tenant, ids, fake.embed_rev)
            assert len(before) == 90
            migrate(urls.admin)
            _compare_all(repo, tenant, fake)
            after_hits = [h.entry_id for h in service.query_org_memory(tenant, TOPICS[0]).hits]
            assert after_hits == before_hits
            assert repo.distances_between(tenant, ids, fake.embed_rev) == before
        finally:
            conn.close()


def test_two_deploys_moving_0022_to_the_latest_at_once(
    database: DatabaseUrls, admin_conn: psycopg.Connection[Any]
) -> None:
    with database_at(database, admin_conn, 22) as urls:
        applied: list[list[int]] = []
        failures: list[BaseException] = []
        start = threading.Barrier(2)

        def deploy() -> None:
            start.wait()
            try:
                applied.append([m.version for m in migrate(urls.admin)])
            except BaseException as exc:
                failures.append(exc)

        threads = [threading.Thread(target=deploy) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert failures == []
        later = [m.version for m in available_migrations() if m.version > 22]
        assert sorted(applied[0] + applied[1]) == later


def test_search_and_pair_distances_leave_nothing_on_the_pooled_backend(
    service: MemoryService,
    tenant: str,
    database: DatabaseUrls,
    pooled_database: DatabaseUrls,
    admin_conn: psycopg.Connection[Any],
) -> None:
    fake = FakeEmbeddingProvider()
    _fill(service, tenant, 40)
    assert tenant in ensure_hnsw_indexes(database.admin, min_entries=30)
    a = connect(pooled_database.app)
    b = connect(pooled_database.app)
    try:
        repo = MemoryRepository(a)
        _compare_all(repo, tenant, fake)
        rows = a.execute(
            "SELECT entry_id FROM grandbo_search(%s, '{}'::text[], NULL, %s, 2.0::float8,"
            " NULL, 25, NULL, NULL, 1.2::float8, 0.75::float8, 3.0::float8,"
            " 'relaxed_order', '40')",
            (tenant, fake.embed_rev),
        ).fetchall()
        assert rows
        ids = [
            r[0]
            for r in admin_conn.execute(
                "SELECT entry_id FROM org_memory_entries WHERE tenant_id = %s LIMIT 5", (tenant,)
            ).fetchall()
        ]
        assert len(repo.distances_between(tenant, ids, fake.embed_rev)) == 5 * 4
        assert backend_pid(a) == backend_pid(b)
        assert carried_over(b) == CLEAN
        plan_mode = b.execute("SELECT current_setting('plan_cache_mode')").fetchone()
        assert plan_mode == ("auto",)
        assert b.execute("SELECT count(*) FROM org_memory_entries").fetchone() == (0,)
    finally:
        a.close()
        b.close()
        admin_conn.execute(
            "DROP INDEX IF EXISTS "
            + __import__(
                "grandbo.memory.repository.vector_indexes", fromlist=["index_name"]
            ).index_name(tenant)
        )
