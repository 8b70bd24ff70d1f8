"""The search in one call (`grandbo_search`, migrations 0022-0023) answers what the six
statements answer, field for field, over a lake with every kind of entry the legs must
handle, with the organization's own HNSW index and without; and it runs only inside its
own tenant's scope (issue 28, items 2-3)."""

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
from grandbo.memory.repository import MemoryRepository, SearchLegs
from grandbo.memory.repository.vector_indexes import ensure_hnsw_indexes, index_name
from grandbo.memory.service import MemoryService
from grandbo.storage.connections import DatabaseUrls
from grandbo.text.tags import tokenize

from .search_comparison import WORDS, comparable

SERVICES = ("checkout-api", "payments", "ledger", None)


def _context(n: int) -> WriteContext:
    return WriteContext(actor="test", idempotency_key=idempotency_key(KeySpace.CLI, str(n)))


def _lake(service: MemoryService, tenant: str, count: int, seed: int) -> list[Any]:
    rng = random.Random(seed)
    written = []
    for n in range(count):
        words = rng.sample(WORDS, 6)
        entry = {
            "title": f"{words[0].capitalize()} {words[1]} after the {words[2]} change {n}",
            "summary": f"The {words[3]} {words[4]} and the {words[5]} failed together; "
            f"requests timed out until incident {n} was mitigated.",
            "service": rng.choice(SERVICES),
            "kind": "episodic" if n % 7 == 0 else "durable",
        }
        written.append(service.record_entry(tenant, entry, _context(seed * 10_000 + n)).entry)
    return written


def _compare(statements: SearchLegs, one_call: SearchLegs) -> None:
    left, right = comparable(statements, one_call)
    assert left == right


@pytest.fixture
def lake(service: MemoryService, tenant: str, other_tenant: str) -> dict[str, Any]:
    entries = _lake(service, tenant, 160, seed=1)
    _lake(service, other_tenant, 40, seed=2)
    # most embedded, a few not yet (the coverage counts them); some retired
    service.embed_pending(tenant)
    service.embed_pending(other_tenant)
    for entry in entries[150:]:
        service.correct_entry(
            tenant,
            entry.entry_id,
            {"title": entry.title + " corrected", "summary": entry.summary},
            _context(900_000 + entry.revision * 1000 + entries.index(entry)),
        )
    for entry in entries[140:145]:
        service.retire_entry(
            tenant, entry.entry_id, "obsolete", _context(800_000 + entries.index(entry))
        )
    return {"entries": entries}


def _compare_searches(
    service: MemoryService,
    repository: MemoryRepository,
    tenant: str,
    other_tenant: str,
    entries: list[Any],
    fake_provider: FakeEmbeddingProvider,
) -> int:
    """60 randomized searches compared; how many found something."""
    rng = random.Random(7)
    foreign = _lake(service, other_tenant, 1, seed=3)[0].entry_id
    later = datetime.now(UTC) + timedelta(days=DEFAULT_EPISODIC_TTL_DAYS + 1)
    compared = 0
    for n in range(60):
        topic = " ".join(rng.sample(WORDS, rng.randint(2, 7)))
        probes: list[UUID] = [*rng.sample([e.entry_id for e in entries], 2), foreign, uuid4()]
        settings: dict[str, Any] = {
            "topic_tags": tokenize(topic),
            "topic_vector": None if n % 10 == 9 else fake_provider.embed([topic])[0],
            "embed_rev": fake_provider.embed_rev,
            "vector_cutoff": rng.choice((0.8, 0.95, 2.0)),
            "services": rng.choice((None, None, ["checkout-api"], ["payments", "ledger"])),
            "leg_limit": rng.choice((LEG_LIMIT, 5, 1)),
            "now": rng.choice((None, datetime.now(UTC), later)),
            "probe": probes,
        }
        one = repository.search(tenant, **settings)
        six = repository.search_statements(tenant, **settings)
        _compare(six, one)
        compared += bool(one.vector)
    return compared


def test_the_function_answers_what_the_statements_answer(
    service: MemoryService,
    repository: MemoryRepository,
    tenant: str,
    other_tenant: str,
    lake: dict[str, Any],
    fake_provider: FakeEmbeddingProvider,
) -> None:
    found = _compare_searches(
        service, repository, tenant, other_tenant, lake["entries"], fake_provider
    )
    assert found > 40  # most searches found something to compare


def test_with_the_organizations_own_hnsw_index_the_answers_are_the_same(
    service: MemoryService,
    repository: MemoryRepository,
    tenant: str,
    other_tenant: str,
    lake: dict[str, Any],
    fake_provider: FakeEmbeddingProvider,
    database: DatabaseUrls,
    admin_conn: psycopg.Connection[Any],
) -> None:
    """The vector leg of an organization with its own partial HNSW index is planned on
    each call with the tenant's value (a generic plan cannot use the index: migration
    0023); the function finds the index by the name the index job gives it."""
    assert tenant in ensure_hnsw_indexes(database.admin, min_entries=100)
    try:
        found = admin_conn.execute(
            "SELECT to_regclass(grandbo_hnsw_index_name(%s)) IS NOT NULL", (tenant,)
        ).fetchone()
        assert found == (True,)
        searched = _compare_searches(
            service, repository, tenant, other_tenant, lake["entries"], fake_provider
        )
        assert searched > 40
    finally:
        admin_conn.execute(f"DROP INDEX IF EXISTS {index_name(tenant)}")


def test_the_functions_index_name_is_the_index_jobs(admin_conn: psycopg.Connection[Any]) -> None:
    for tenant in ("t-1", "acme", "an-organization-with-a-long-name-0123456789", "x" * 64):
        row = admin_conn.execute("SELECT grandbo_hnsw_index_name(%s)", (tenant,)).fetchone()
        assert row == (index_name(tenant),)


def test_an_empty_organization_and_a_topic_of_no_known_tag(
    repository: MemoryRepository, fake_provider: FakeEmbeddingProvider
) -> None:
    nobody = f"t-{uuid4().hex[:10]}"
    settings: dict[str, Any] = {
        "topic_tags": ["nothing", "known"],
        "topic_vector": fake_provider.embed(["nothing known"])[0],
        "embed_rev": fake_provider.embed_rev,
        "vector_cutoff": 0.8,
        "services": None,
        "leg_limit": LEG_LIMIT,
    }
    _compare(
        repository.search_statements(nobody, **settings), repository.search(nobody, **settings)
    )


def test_the_function_runs_only_inside_its_own_tenants_scope(
    app_conn: psycopg.Connection[Any], tenant: str, other_tenant: str, lake: dict[str, Any]
) -> None:
    call = (
        "SELECT count(*) AS n FROM grandbo_search(%s, %s::text[], NULL, 'rev', 0.8::float8,"
        " NULL, 25, NULL, NULL, 1.2::float8, 0.75::float8, 3.0::float8, 'relaxed_order', '40')"
    )
    tags = ["checkout", "pool"]
    # no tenant: refused
    with app_conn.transaction(), pytest.raises(psycopg.errors.InsufficientPrivilege):
        app_conn.execute(call, ("", tags))
    # alone (autocommit): it scopes its own statement, and leaves nothing set after it
    row = app_conn.execute(call, (tenant, tags)).fetchone()
    assert row is not None
    assert row[0] > 1
    after = app_conn.execute("SELECT grandbo_current_tenant()").fetchone()
    assert after == (None,)
    with app_conn.transaction():  # another tenant's scope: refused
        app_conn.execute("SELECT set_config('grandbo.tenant_id', %s, true)", (other_tenant,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app_conn.execute(call, (tenant, tags))
    with app_conn.transaction():  # its own: answers
        app_conn.execute("SELECT set_config('grandbo.tenant_id', %s, true)", (tenant,))
        row = app_conn.execute(call, (tenant, tags)).fetchone()
        assert row is not None
        assert row[0] > 1
