"""Tenant isolation at the SQL level: RLS alone, with no tenant predicate, still isolates.

Every test runs twice: on a connection of its own, and through PgBouncer in transaction
mode, where the backend is shared in turn with other clients as RDS Proxy shares it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from grandbo.errors import EntryNotFoundError, InvalidInputError
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService
from grandbo.storage.connections import DatabaseUrls, connect

from .helpers import context, entry

SECRET = entry(
    "Tenant B secret finding",
    "B's checkout requests waited for a database connection from the pool during the incident",
)
TOPIC = "checkout requests wait for a database connection from the pool"
ALPHA = "Alpha: a cron misconfiguration ran the nightly billing report twice"
HIJACK = "Hijacked text: tenant A tries to rewrite what tenant B learned about its pool"


@pytest.fixture(params=["direct", "through_transaction_pooler"])
def app_conn(
    request: pytest.FixtureRequest, database: DatabaseUrls
) -> Iterator[psycopg.Connection[Any]]:
    """The application role's connection, direct or through the pooler."""
    urls = database if request.param == "direct" else request.getfixturevalue("pooled_database")
    conn = connect(urls.app)
    yield conn
    conn.close()


@pytest.fixture
def two_tenants(service: MemoryService, tenant: str, other_tenant: str) -> tuple[Any, Any]:
    mine = service.record_entry(tenant, entry("Tenant A finding", ALPHA), context())
    theirs = service.record_entry(other_tenant, SECRET, context("key-1"))
    service.embed_pending(other_tenant)
    return mine.entry, theirs.entry


def test_a_raw_query_without_tenant_predicate_sees_only_the_scoped_tenant(
    app_conn: psycopg.Connection[Any], tenant: str, two_tenants: tuple[Any, Any]
) -> None:
    mine, _ = two_tenants
    with app_conn.transaction():
        app_conn.execute("SELECT set_config('grandbo.tenant_id', %s, true)", (tenant,))
        rows = app_conn.execute("SELECT tenant_id, entry_id FROM org_memory_entries").fetchall()
        events = app_conn.execute("SELECT DISTINCT tenant_id FROM org_memory_events").fetchall()
        stats = app_conn.execute("SELECT DISTINCT tenant_id FROM org_memory_tag_stats").fetchall()
    assert rows == [(tenant, mine.entry_id)]
    assert events == [(tenant,)]
    assert stats == [(tenant,)]


def test_an_unset_tenant_sees_nothing(
    app_conn: psycopg.Connection[Any], two_tenants: tuple[Any, Any]
) -> None:
    assert app_conn.execute("SELECT count(*) FROM org_memory_entries").fetchone() == (0,)
    with app_conn.transaction():
        app_conn.execute("SELECT set_config('grandbo.tenant_id', '', true)")
        assert app_conn.execute("SELECT count(*) FROM org_memory_events").fetchone() == (0,)


def test_the_tenant_setting_does_not_outlive_its_transaction(
    app_conn: psycopg.Connection[Any], tenant: str, two_tenants: tuple[Any, Any]
) -> None:
    with app_conn.transaction():
        app_conn.execute("SELECT set_config('grandbo.tenant_id', %s, true)", (tenant,))
    # the same pooled connection, next transaction: nothing is visible any more
    assert app_conn.execute("SELECT count(*) FROM org_memory_entries").fetchone() == (0,)


def test_writing_another_tenants_row_is_refused_by_rls(
    app_conn: psycopg.Connection[Any], tenant: str, other_tenant: str, two_tenants: tuple[Any, Any]
) -> None:
    with app_conn.transaction(force_rollback=True):
        app_conn.execute("SELECT set_config('grandbo.tenant_id', %s, true)", (tenant,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege), app_conn.transaction():
            app_conn.execute(
                "INSERT INTO org_memory_tenant_stats VALUES (%s, 0, 0)", (other_tenant,)
            )
    with app_conn.transaction():
        app_conn.execute("SELECT set_config('grandbo.tenant_id', %s, true)", (tenant,))
        updated = app_conn.execute(
            "UPDATE org_memory_entries SET title = 'hijacked' WHERE tenant_id = %s",
            (other_tenant,),
        )
        assert updated.rowcount == 0


def test_an_upsert_with_another_tenants_key_never_touches_their_row(
    service: MemoryService,
    tenant: str,
    other_tenant: str,
    two_tenants: tuple[Any, Any],
    admin_conn: psycopg.Connection[Any],
) -> None:
    _, theirs = two_tenants
    # same idempotency key as tenant B's write, different text, written as tenant A
    outcome = service.record_entry(
        tenant,
        entry("A's text", "A's text, written with the key tenant B used, overwrites nothing of B"),
        context("key-1"),
    )
    assert outcome.applied
    assert outcome.entry.tenant_id == tenant
    row = admin_conn.execute(
        "SELECT title FROM org_memory_entries WHERE tenant_id = %s AND entry_id = %s",
        (other_tenant, theirs.entry_id),
    ).fetchone()
    assert row == (SECRET["title"],)


def test_no_service_call_reads_or_changes_another_tenants_entry(
    service: MemoryService, tenant: str, two_tenants: tuple[Any, Any]
) -> None:
    _, theirs = two_tenants
    result = service.query_org_memory(tenant, TOPIC)
    assert all(hit.entry_id != theirs.entry_id for hit in result.hits)
    assert result.metadata.active_entries == 1
    with pytest.raises(EntryNotFoundError):
        service.get_entry(tenant, theirs.entry_id)
    with pytest.raises(EntryNotFoundError):
        service.correct_entry(tenant, theirs.entry_id, entry("Hijack", HIJACK), context())
    with pytest.raises(EntryNotFoundError):
        service.retire_entry(tenant, theirs.entry_id, "hijack", context())
    with pytest.raises(EntryNotFoundError):
        service.retire_entry(
            tenant, two_tenants[0].entry_id, "point at B", context(), superseded_by=theirs.entry_id
        )


def test_backfill_keeps_every_job_under_its_own_tenant(
    service: MemoryService, tenant: str, other_tenant: str
) -> None:
    a = service.record_entry(tenant, entry("A finding", ALPHA), context()).entry
    b = service.record_entry(
        other_tenant,
        entry(
            "B finding", "Beta: the nightly export filled the reports volume until writes failed"
        ),
        context(),
    ).entry
    jobs = {job.entry_id: job.tenant_id for job in service.pending_jobs()}
    assert jobs[a.entry_id] == tenant
    assert jobs[b.entry_id] == other_tenant
    service.embed_jobs(
        [j for j in service.pending_jobs() if j.entry_id in {a.entry_id, b.entry_id}]
    )
    assert service.get_entry(tenant, a.entry_id).embedded_revision == 1
    assert service.get_entry(other_tenant, b.entry_id).embedded_revision == 1


@pytest.mark.parametrize("bad", ["", "UPPER", "semi;colon", "x" * 64, "tenant' OR '1'='1"])
def test_malformed_tenant_ids_never_reach_sql(repository: MemoryRepository, bad: str) -> None:
    import uuid

    with pytest.raises(InvalidInputError) as error:
        repository.get_entry(bad, uuid.uuid4())
    assert error.value.field == "tenant_id"
