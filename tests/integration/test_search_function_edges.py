"""Issue 28 (from its break-it pass; migrations 0023-0025): data shapes the same-answers test
does not cover, compared field by field with the six statements."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.memory.domain.idempotency import KeySpace, idempotency_key
from grandbo.memory.domain.models import DEFAULT_EPISODIC_TTL_DAYS, WriteContext
from grandbo.memory.read.recall import LEG_LIMIT
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.repository.vector_indexes import ensure_hnsw_indexes, index_name
from grandbo.memory.service import MemoryService
from grandbo.storage.connections import DatabaseUrls
from grandbo.text.tags import tokenize

from .search_comparison import WORDS, comparable


def _context(key: str) -> WriteContext:
    return WriteContext(actor="test", idempotency_key=idempotency_key(KeySpace.CLI, key))


def _lake(service: MemoryService, tenant: str, count: int, seed: int) -> list[Any]:
    rng = random.Random(seed)
    out = []
    for n in range(count):
        w = rng.sample(WORDS, 6)
        out.append(
            service.record_entry(
                tenant,
                {
                    "title": f"{w[0].capitalize()} {w[1]} after the {w[2]} change {n}",
                    "summary": f"The {w[3]} {w[4]} and the {w[5]} failed; incident {n}.",
                    "service": rng.choice(("checkout-api", "payments", None)),
                    "kind": "episodic" if n % 5 == 0 else "durable",
                },
                _context(f"{tenant}-{seed}-{n}"),
            ).entry
        )
    service.embed_pending(tenant)
    return out


def _settings(fake: FakeEmbeddingProvider, topic: str, **over: Any) -> dict[str, Any]:
    s: dict[str, Any] = {
        "topic_tags": tokenize(topic),
        "topic_vector": fake.embed([topic])[0],
        "embed_rev": fake.embed_rev,
        "vector_cutoff": 2.0,
        "services": None,
        "leg_limit": LEG_LIMIT,
        "now": datetime.now(UTC),
        "probe": [],
    }
    s.update(over)
    return s


def _same(repository: MemoryRepository, tenant: str, settings: dict[str, Any]) -> Any:
    one = repository.search(tenant, **settings)
    six = repository.search_statements(tenant, **settings)
    left, right = comparable(six, one)
    assert left == right
    return one


TOPICS = [
    "checkout pool connection leak timeout",
    "dns resolver cache ttl latency",
    "certificate tls handshake deploy canary rollback",
    "queue backlog consumer lag partition",
]


def test_index_created_then_dropped_between_searches_on_one_backend(
    service: MemoryService,
    repository: MemoryRepository,
    app_conn: psycopg.Connection[Any],
    admin_conn: psycopg.Connection[Any],
    database: DatabaseUrls,
    tenant: str,
    fake_provider: FakeEmbeddingProvider,
) -> None:
    _lake(service, tenant, 120, seed=11)
    pid = app_conn.info.backend_pid
    try:
        for _ in range(3):  # plans cached on this backend
            for topic in TOPICS:
                _same(repository, tenant, _settings(fake_provider, topic))
        assert tenant in ensure_hnsw_indexes(database.admin, min_entries=50)
        for topic in TOPICS:
            _same(repository, tenant, _settings(fake_provider, topic))
            _same(repository, tenant, _settings(fake_provider, topic, services=["payments"]))
        admin_conn.execute(f"DROP INDEX {index_name(tenant)}")
        for topic in TOPICS:
            _same(repository, tenant, _settings(fake_provider, topic))
        assert app_conn.info.backend_pid == pid
    finally:
        admin_conn.execute(f"DROP INDEX IF EXISTS {index_name(tenant)}")


def test_an_index_left_invalid(
    service: MemoryService,
    repository: MemoryRepository,
    admin_conn: psycopg.Connection[Any],
    database: DatabaseUrls,
    tenant: str,
    fake_provider: FakeEmbeddingProvider,
) -> None:
    _lake(service, tenant, 80, seed=12)
    assert tenant in ensure_hnsw_indexes(database.admin, min_entries=50)
    try:
        admin_conn.execute(
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass",
            (index_name(tenant),),
        )
        for topic in TOPICS:
            _same(repository, tenant, _settings(fake_provider, topic, leg_limit=5))
    finally:
        admin_conn.execute(f"DROP INDEX IF EXISTS {index_name(tenant)}")


@pytest.mark.parametrize("leg_limit", [0, 1, 2**31 - 1])
def test_leg_limit_edges(
    service: MemoryService,
    repository: MemoryRepository,
    tenant: str,
    fake_provider: FakeEmbeddingProvider,
    leg_limit: int,
) -> None:
    _lake(service, tenant, 40, seed=13)
    later = datetime.now(UTC) + timedelta(days=DEFAULT_EPISODIC_TTL_DAYS + 1)
    for topic in TOPICS:
        _same(repository, tenant, _settings(fake_provider, topic, leg_limit=leg_limit))
        _same(repository, tenant, _settings(fake_provider, topic, leg_limit=leg_limit, now=later))


def test_a_negative_leg_limit_fails_alike(
    repository: MemoryRepository, tenant: str, fake_provider: FakeEmbeddingProvider
) -> None:
    s = _settings(fake_provider, TOPICS[0], leg_limit=-1)
    errors = []
    for call in (repository.search, repository.search_statements):
        try:
            call(tenant, **s)
            errors.append(None)
        except Exception as exc:
            errors.append(type(exc))
    assert errors[0] == errors[1]


def test_no_vector_no_tags_probes_only_and_many_tags(
    service: MemoryService,
    repository: MemoryRepository,
    tenant: str,
    other_tenant: str,
    fake_provider: FakeEmbeddingProvider,
) -> None:
    mine = _lake(service, tenant, 40, seed=14)
    theirs = _lake(service, other_tenant, 5, seed=15)
    probes: list[UUID] = [mine[0].entry_id, mine[0].entry_id, theirs[0].entry_id, uuid4()]
    probes.append(mine[3].entry_id)
    service.retire_entry(tenant, mine[3].entry_id, "obsolete", _context("retire-3"))
    _same(repository, tenant, _settings(fake_provider, TOPICS[0], topic_vector=None, probe=probes))
    _same(repository, tenant, _settings(fake_provider, TOPICS[0], topic_tags=[], probe=probes))
    _same(
        repository,
        tenant,
        _settings(fake_provider, TOPICS[0], topic_tags=[], topic_vector=None, probe=probes),
    )
    many = [*WORDS, *(f"tag{n}" for n in range(3000))]
    one = _same(repository, tenant, _settings(fake_provider, " ".join(WORDS), topic_tags=many))
    assert one.lexical
    # duplicates and unsorted tags
    _same(repository, tenant, _settings(fake_provider, TOPICS[1], topic_tags=["ttl", "dns", "ttl"]))


def test_legacy_null_in_title_postings(
    service: MemoryService,
    repository: MemoryRepository,
    admin_conn: psycopg.Connection[Any],
    tenant: str,
    fake_provider: FakeEmbeddingProvider,
) -> None:
    _lake(service, tenant, 40, seed=16)
    admin_conn.execute(
        "UPDATE org_memory_tag_postings SET in_title = NULL"
        " WHERE tenant_id = %s AND tag IN ('checkout', 'dns', 'queue')",
        (tenant,),
    )
    try:
        for topic in TOPICS:
            _same(repository, tenant, _settings(fake_provider, topic, leg_limit=5))
    finally:  # nothing left for another test's sweep of every tenant to fill
        service.mark_title_tags(tenant)


@pytest.mark.parametrize("odd", ["0", "9_", "a" * 63, "z-_-_-", "x1"])
def test_unusual_tenant_ids_with_their_own_index(
    service: MemoryService,
    repository: MemoryRepository,
    admin_conn: psycopg.Connection[Any],
    database: DatabaseUrls,
    fake_provider: FakeEmbeddingProvider,
    odd: str,
) -> None:
    admin_conn.execute("SELECT 1")
    existing = admin_conn.execute(
        "SELECT count(*) FROM org_memory_tenants WHERE tenant_id = %s", (odd,)
    ).fetchone()
    if existing and existing[0]:
        pytest.skip("tenant id already used in this database")
    _lake(service, odd, 60, seed=17)
    try:
        for topic in TOPICS:
            _same(repository, odd, _settings(fake_provider, topic, leg_limit=5))
        assert odd in ensure_hnsw_indexes(database.admin, min_entries=50)
        for topic in TOPICS:
            _same(repository, odd, _settings(fake_provider, topic, leg_limit=5))
    finally:
        admin_conn.execute(f'DROP INDEX IF EXISTS "{index_name(odd)}"')


@pytest.mark.parametrize("index_scans", ["on", "off"])
def test_entries_at_one_distance_across_the_leg_limit_are_kept_by_id(
    service: MemoryService,
    repository: MemoryRepository,
    app_conn: psycopg.Connection[Any],
    admin_conn: psycopg.Connection[Any],
    tenant: str,
    fake_provider: FakeEmbeddingProvider,
    index_scans: str,
) -> None:
    """Twelve entries with one vector, a leg of three: both paths keep the three smallest
    ids (migration 0025), where each kept whichever its plan read first (a scan of the
    primary key happened to read the smallest first; a scan of the heap does not)."""
    lake = _lake(service, tenant, 12, seed=21)
    service.embed_pending(tenant)
    admin_conn.execute(
        "UPDATE org_memory_entries SET embedding = (SELECT embedding FROM org_memory_entries"
        "  WHERE tenant_id = %s AND entry_id = %s)"
        " WHERE tenant_id = %s AND embedding IS NOT NULL",
        (tenant, lake[0].entry_id, tenant),
    )
    row = admin_conn.execute(
        "SELECT embedding::text FROM org_memory_entries WHERE tenant_id = %s AND entry_id = %s",
        (tenant, lake[0].entry_id),
    ).fetchone()
    assert row is not None
    vector = [float(x) for x in row[0].strip("[]").split(",")]
    expected = [
        r[0]
        for r in admin_conn.execute(
            "SELECT entry_id FROM org_memory_entries WHERE tenant_id = %s AND status = 'active'"
            " AND embed_rev = %s ORDER BY entry_id LIMIT 3",
            (tenant, fake_provider.embed_rev),
        )
    ]
    settings = _settings(fake_provider, "nothing in common", topic_vector=vector, leg_limit=3)
    settings["now"] = None
    app_conn.execute(f"SET enable_indexscan = {index_scans}")
    app_conn.execute(f"SET enable_bitmapscan = {index_scans}")
    try:
        one = _same(repository, tenant, settings)
    finally:
        app_conn.execute("RESET enable_indexscan")
        app_conn.execute("RESET enable_bitmapscan")
    assert [c.entry_id for c in one.vector] == expected
