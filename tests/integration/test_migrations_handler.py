"""The deploy's custom resource (issue 12, item 5): it migrates for its own bundle of
migrations, and a rollback (the old properties, sent to the new code) changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from grandbo.local.runner import lambda_context
from grandbo.migrations import migrations_digest
from grandbo.storage.connections import DatabaseUrls


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
    monkeypatch.setattr(migrations, "get_secret", lambda arn: '{"password": "local-only"}')
    monkeypatch.setenv("GRANDBO_DB_SECRET_ARN", "arn:aws:secretsmanager:local:0:secret:app")
    reply = migrations.lambda_handler(
        _event("Update", migrations_digest()), lambda_context("migrations")
    )
    assert reply["PhysicalResourceId"] == "grandbo-schema"
    assert reply["Data"] == {"Applied": ""}  # all applied already by the test session


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
