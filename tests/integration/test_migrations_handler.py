"""The deploy's custom resource (issue 12, item 5): it migrates for its own bundle of
migrations, and a rollback (the old properties, sent to the new code) changes nothing."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest

from grandbo.errors import MigrationError
from grandbo.local.runner import lambda_context
from grandbo.migrations import migrations_digest
from grandbo.storage.connections import DatabaseUrls
from tests.lambda_events import TimedContext

from .helpers import database_at


def _event(request_type: str, digest: str) -> dict[str, Any]:
    return {
        "RequestType": request_type,
        "PhysicalResourceId": "grandbo-schema",
        "ResourceProperties": {"MigrationsDigest": digest},
        "OldResourceProperties": {"MigrationsDigest": "x" * 64},
    }


def test_an_update_for_the_bundled_migrations_migrates(
    database: DatabaseUrls, monkeypatch: pytest.MonkeyPatch
) -> None:
    import functions.migrations.handler as migrations

    monkeypatch.setattr(migrations, "schema_owner_url", lambda: database.admin)
    monkeypatch.setattr(migrations, "secret_value", lambda arn: '{"password": "local-only"}')
    monkeypatch.setenv("GRANDBO_DB_SECRET_ARN", "arn:aws:secretsmanager:local:0:secret:app")
    reply = migrations.lambda_handler(
        _event("Update", migrations_digest()), TimedContext(900_000, "grandbo-migrations")
    )
    assert reply["PhysicalResourceId"] == "grandbo-schema"
    assert reply["Data"] == {"Applied": ""}  # all applied already by the test session


def test_a_migration_the_function_has_no_time_for_fails_the_deploy_saying_so(
    database: DatabaseUrls, admin_conn: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 23, item 7: the function bounds every statement to its own time left (less
    its margin), so a migration too long for it is cancelled by the server, rolled back,
    and reported as a timeout, instead of running on under its locks after the function
    timed out."""
    import functions.migrations.handler as migrations

    import grandbo.migrations as schema
    from grandbo.migrations import Migration, available_migrations

    bundled = available_migrations()
    # several statements, each shorter than the time left and all of them longer: the
    # bound is on the migration, not on each statement (PostgreSQL applies
    # statement_timeout to each statement of a multi-statement query separately)
    slow = Migration(
        len(bundled) + 1,
        "slow",
        "CREATE TABLE slow_marker (id int);"
        + "SELECT pg_sleep(1.5);" * 4
        + "CREATE TABLE slow_marker_after (id int);",
    )
    monkeypatch.setattr(schema, "available_migrations", lambda: [*bundled, slow])
    monkeypatch.setattr(migrations, "migrations_digest", lambda: "digest-with-slow")
    with database_at(database, admin_conn, len(bundled)) as scratch:
        monkeypatch.setattr(migrations, "schema_owner_url", lambda: scratch.admin)
        started = time.monotonic()
        with pytest.raises(MigrationError, match=f"migration {slow.version:04d}_slow timed out"):
            # 2 s after the function's 30 s margin
            migrations.lambda_handler(
                _event("Update", "digest-with-slow"),
                TimedContext((migrations.MARGIN_S + 2) * 1000, "grandbo-migrations"),
            )
        assert time.monotonic() - started < 5
        with psycopg.connect(scratch.admin) as conn:
            recorded = conn.execute("SELECT max(version) FROM grandbo_schema_migrations")
            assert recorded.fetchone() == (len(bundled),)
            # rolled back whole: not even its first statement stayed
            assert conn.execute("SELECT to_regclass('slow_marker')").fetchone() == (None,)


def test_a_rollback_to_other_migrations_touches_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    import functions.migrations.handler as migrations

    def no_database() -> str:
        raise AssertionError("a rollback must not reach the database")

    monkeypatch.setattr(migrations, "schema_owner_url", no_database)
    for request_type in ("Update", "Create"):
        reply = migrations.lambda_handler(
            _event(request_type, "0" * 64), lambda_context("migrations")
        )
        assert reply == {"PhysicalResourceId": "grandbo-schema"}
