"""Entries hash-partitioned by organization (migration 0016): a lake written at version 15
moves whole, keeps every index it had (the HNSW ones rebuilt by the index job on the
partition that holds their organization), answers the same, and a partition read
directly is refused to the application role. All of it also when the schema owner is not
a superuser (Aurora's master user), for whom row-level security stays forced."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.repository.vector_indexes import ensure_hnsw_indexes, index_name
from grandbo.memory.service import MemoryService
from grandbo.migrations import available_migrations, migrate
from grandbo.storage.connections import DatabaseUrls, connect, url_as

from .helpers import context, database_at, entry

TENANTS = ("acme", "globex", "initech")
TOPIC = "checkout requests time out waiting for a database connection from the pool"


@pytest.fixture
def v15_database(
    database: DatabaseUrls, admin_conn: psycopg.Connection[Any]
) -> Iterator[DatabaseUrls]:
    with database_at(database, admin_conn, 15) as urls:
        yield urls


def _rows(admin_url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(admin_url) as conn:
        return conn.execute(
            "SELECT * FROM org_memory_entries ORDER BY tenant_id, entry_id"
        ).fetchall()


def _index_definitions(admin_url: str) -> set[str]:
    """The entries table's indexes but the per-tenant HNSW ones, as the parent states them."""
    with psycopg.connect(admin_url) as conn:
        return {
            row[0].replace(" ON ONLY ", " ON ")
            for row in conn.execute(
                "SELECT indexdef FROM pg_indexes WHERE tablename = 'org_memory_entries'"
                " AND indexname NOT LIKE 'org\\_memory\\_entries\\_hnsw\\_%'"
            )
        }


def _shape(admin_url: str) -> list[tuple[Any, ...]]:
    """The entries table's columns (type, NOT NULL, default, storage) and constraints."""
    with psycopg.connect(admin_url) as conn:
        columns = conn.execute(
            "SELECT attname, format_type(atttypid, atttypmod), attnotnull,"
            " pg_get_expr(d.adbin, d.adrelid), attstorage FROM pg_attribute a"
            " LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
            " WHERE attrelid = 'org_memory_entries'::regclass AND attnum > 0"
            " AND NOT attisdropped ORDER BY attnum"
        ).fetchall()
        constraints = conn.execute(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conrelid = 'org_memory_entries'::regclass ORDER BY conname"
        ).fetchall()
    return columns + constraints


def _answers(service: MemoryService) -> dict[str, list[Any]]:
    return {
        tenant: [hit.entry_id for hit in service.query_org_memory(tenant, TOPIC, limit=5).hits]
        for tenant in TENANTS
    }


def test_0016_partitions_a_populated_lake_without_changing_an_answer(
    v15_database: DatabaseUrls,
) -> None:
    with connect(v15_database.app) as conn:
        service = MemoryService(MemoryRepository(conn), FakeEmbeddingProvider())
        for n, tenant in enumerate(TENANTS):
            created = service.record_entries(
                tenant,
                [
                    (
                        entry(
                            f"Checkout pool exhausted {tenant} {i}",
                            f"checkout {tenant} leaked database connections on retry path {i}"
                            " until the pool ran dry and requests timed out",
                        ),
                        context(),
                    )
                    for i in range(4 + n)
                ],
            )
            service.retire_entry(tenant, created[0].entry.entry_id, "outdated", context())
            service.embed_pending(tenant)
        before = _answers(service)
    assert ensure_hnsw_indexes(v15_database.admin, min_entries=1) == sorted(TENANTS)
    rows, indexes = _rows(v15_database.admin), _index_definitions(v15_database.admin)
    shape = _shape(v15_database.admin)

    migrate(v15_database.admin, up_to=16)  # what 0016 changes, and nothing after it

    assert _rows(v15_database.admin) == rows
    assert _index_definitions(v15_database.admin) == indexes
    assert _shape(v15_database.admin) == shape
    with psycopg.connect(v15_database.admin) as conn:
        kind = conn.execute(
            "SELECT relkind FROM pg_class WHERE relname = 'org_memory_entries'"
        ).fetchone()
        assert kind == ("p",)
        # each organization wholly in one partition; the HNSW indexes went with the old table
        homes = conn.execute(
            "SELECT tenant_id, count(DISTINCT tableoid) FROM org_memory_entries GROUP BY 1"
        ).fetchall()
        assert sorted(homes) == [(tenant, 1) for tenant in TENANTS]
        assert conn.execute(
            "SELECT count(*) FROM pg_indexes WHERE indexname LIKE 'org\\_memory\\_entries\\_hnsw%'"
        ).fetchone() == (0,)

    assert ensure_hnsw_indexes(v15_database.admin, min_entries=1) == sorted(TENANTS)
    with psycopg.connect(v15_database.admin) as conn:
        for tenant in TENANTS:
            home = conn.execute(
                "SELECT DISTINCT tableoid::regclass::text FROM org_memory_entries"
                " WHERE tenant_id = %s",
                (tenant,),
            ).fetchone()
            assert home is not None
            assert (
                conn.execute(
                    "SELECT tablename FROM pg_indexes WHERE indexname = %s", (index_name(tenant),)
                ).fetchone()
                == home
            )
    with connect(v15_database.app) as conn:
        service = MemoryService(MemoryRepository(conn), FakeEmbeddingProvider())
        assert _answers(service) == before
        # the application reaches entries through the parent only
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT * FROM org_memory_entries_p00")


@pytest.fixture
def plain_owner(admin_conn: psycopg.Connection[Any]) -> Iterator[str]:
    """A schema owner that is no superuser and cannot bypass row-level security, but, as
    Aurora's master user (rds_superuser), may create roles and administers the one it
    created: the migrations set the application role's password and its defaults."""
    role = f"grandbo_owner_{uuid.uuid4().hex[:8]}"
    admin_conn.execute(f"CREATE ROLE {role} LOGIN NOSUPERUSER NOBYPASSRLS CREATEROLE")
    admin_conn.execute(f"GRANT grandbo_app TO {role} WITH ADMIN OPTION")
    try:
        yield role
    finally:
        admin_conn.execute(f"DROP ROLE IF EXISTS {role}")


def test_0016_and_the_index_job_as_an_owner_that_is_no_superuser(
    v15_database: DatabaseUrls, plain_owner: str
) -> None:
    with connect(v15_database.app) as conn:
        service = MemoryService(MemoryRepository(conn), FakeEmbeddingProvider())
        for tenant in TENANTS:
            service.record_entries(
                tenant,
                [
                    (
                        entry(
                            f"Checkout pool exhausted {i}",
                            f"checkout leaked database connections on retry path {i}"
                            " until the pool ran dry and requests timed out",
                        ),
                        context(),
                    )
                    for i in range(3)
                ],
            )
            service.embed_pending(tenant)
        before = _answers(service)
    with psycopg.connect(v15_database.admin, autocommit=True) as conn:
        # every table the owner's, as the Aurora master user owns the schema it created
        for (table,) in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
        ).fetchall():
            conn.execute(f'ALTER TABLE "{table}" OWNER TO {plain_owner}')
        # ... and every function the migrations made (not the vector extension's)
        for (function,) in conn.execute(
            "SELECT p.oid::regprocedure::text FROM pg_proc p"
            " WHERE p.pronamespace = 'public'::regnamespace AND NOT EXISTS ("
            "   SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')"
        ).fetchall():
            conn.execute(f"ALTER FUNCTION {function} OWNER TO {plain_owner}")
        conn.execute(f"GRANT CREATE ON SCHEMA public TO {plain_owner}")
    rows = _rows(v15_database.admin)
    owner_url = url_as(v15_database.admin, plain_owner)
    try:
        pending = [m.version for m in available_migrations()][15:]  # 16 and after
        assert [m.version for m in migrate(owner_url)] == pending
        assert _rows(v15_database.admin) == rows  # every row copied, none left behind
        assert ensure_hnsw_indexes(owner_url, min_entries=1) == sorted(TENANTS)
        with connect(v15_database.app) as conn:
            service = MemoryService(MemoryRepository(conn), FakeEmbeddingProvider())
            assert _answers(service) == before
    finally:
        with psycopg.connect(v15_database.admin, autocommit=True) as conn:
            conn.execute(f"REASSIGN OWNED BY {plain_owner} TO CURRENT_USER")
            conn.execute(f"DROP OWNED BY {plain_owner}")
