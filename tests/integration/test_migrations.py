"""Versioned migrations: applied once, recorded, and an edited applied file is refused."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from grandbo.errors import MigrationError
from grandbo.migrations import available_migrations, migrate
from grandbo.storage.connections import DatabaseUrls


def test_a_second_run_applies_nothing_and_every_version_is_recorded(
    database: DatabaseUrls, admin_conn: psycopg.Connection[Any]
) -> None:
    assert migrate(database.admin) == []
    recorded = [
        row[0]
        for row in admin_conn.execute(
            "SELECT version FROM grandbo_schema_migrations ORDER BY version"
        )
    ]
    assert recorded == [m.version for m in available_migrations()]


def test_an_applied_migration_that_changed_is_refused(
    database: DatabaseUrls, admin_conn: psycopg.Connection[Any]
) -> None:
    (checksum,) = admin_conn.execute(
        "SELECT checksum FROM grandbo_schema_migrations WHERE version = 1"
    ).fetchone() or ("",)
    admin_conn.execute("UPDATE grandbo_schema_migrations SET checksum = 'x' WHERE version = 1")
    try:
        with pytest.raises(MigrationError, match="changed after it was applied"):
            migrate(database.admin)
    finally:
        admin_conn.execute(
            "UPDATE grandbo_schema_migrations SET checksum = %s WHERE version = 1", (checksum,)
        )


def test_the_schema_matches_the_storage_contract(admin_conn: psycopg.Connection[Any]) -> None:
    columns = dict(
        admin_conn.execute(
            "SELECT column_name, format_type(atttypid, atttypmod) FROM information_schema.columns"
            " JOIN pg_attribute ON attrelid = 'org_memory_entries'::regclass"
            "  AND attname = column_name WHERE table_name = 'org_memory_entries'"
        ).fetchall()
    )
    assert columns["embedding"] == "halfvec(1024)"  # the 1,024 contract, 2 bytes a dimension
    assert columns["tags"] == "text[]"
    indexes = [
        row[0]
        for row in admin_conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = 'org_memory_entries'"
        )
    ]
    assert any("USING gin (tags)" in definition for definition in indexes)
    # every table holding tenant data has RLS enabled and forced (the tenant id list alone
    # is readable, for the sweeper)
    rls = admin_conn.execute(
        "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity FROM pg_class c"
        " JOIN information_schema.columns col ON col.table_name = c.relname"
        " WHERE col.column_name = 'tenant_id' AND c.relkind IN ('r', 'p')"
        "   AND c.relname NOT IN ('org_memory_tenants', 'bench_naive_entries')"
    ).fetchall()
    assert {name for name, _, _ in rls} >= {
        "org_memory_events",
        "org_memory_entries",
        "org_memory_tag_stats",
        "org_memory_tenant_stats",
        "org_memory_tag_postings",
        "admin_request_nonces",
        "topology_nodes",
        "topology_edges",
    }
    # the retrieval log's spellings: enabled, not forced, so the one owned search of them
    # (grandbo_log_reach) uses their indexes (issue 52, migration 0040); the application
    # role is held by the policy all the same (test_log_scrub_at_scale)
    assert all(
        enabled and (forced or name == "org_memory_retrieval_spellings")
        for name, enabled, forced in rls
    )
    # entries: hash-partitioned by tenant (migration 0016), each partition holding its rows
    partitions = admin_conn.execute(
        "SELECT count(*) FROM pg_inherits WHERE inhparent = 'org_memory_entries'::regclass"
    ).fetchone()
    assert partitions == (16,)
    assert {f"org_memory_entries_p{n:02d}" for n in range(16)} <= {name for name, _, _ in rls}


def test_the_application_role_owns_nothing_and_cannot_bypass_rls(
    admin_conn: psycopg.Connection[Any],
) -> None:
    role = admin_conn.execute(
        "SELECT rolsuper, rolbypassrls, rolcreaterole, rolcreatedb FROM pg_roles"
        " WHERE rolname = 'grandbo_app'"
    ).fetchone()
    assert role == (False, False, False, False)
    owned = admin_conn.execute(
        "SELECT count(*) FROM pg_class WHERE relowner = 'grandbo_app'::regrole"
    ).fetchone()
    assert owned == (0,)


def test_a_deploy_waiting_on_another_deploys_lock_gives_up_and_says_so(
    database: DatabaseUrls, admin_conn: psycopg.Connection[Any]
) -> None:
    """Issue 23, item 7: a run waits for the deploys' lock at most `lock_wait_s` (the lock
    a statement left running by a timed-out function would keep), then fails naming it."""
    import time

    from grandbo.migrations import _LOCK_KEY

    with admin_conn.transaction():
        admin_conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        started = time.monotonic()
        with pytest.raises(MigrationError, match=r"waited 0\.5 s for a lock"):
            migrate(database.admin, lock_wait_s=0.5)
        assert time.monotonic() - started < 5
    assert migrate(database.admin) == []  # the lock released, the next run goes through


def test_a_run_with_less_than_a_second_left_starts_nothing(database: DatabaseUrls) -> None:
    """Rounded to milliseconds, a bound under 1 ms would be 0: no limit at all."""
    import time

    with pytest.raises(MigrationError, match="no time left"):
        migrate(database.admin, deadline=time.monotonic() + 0.0009)
