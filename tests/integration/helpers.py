"""Small builders shared by the integration tests."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from grandbo.embedding.base import EMBEDDING_DIMENSIONS
from grandbo.memory.domain.models import WriteContext
from grandbo.migrations import migrate
from grandbo.storage.connections import DatabaseUrls, app_url_for

# A small lake about checkout's database connections (and the question it answers), for
# the tests of confidence, its recalibration and what steers it
CHECKOUT_TOPIC = "checkout requests time out waiting for a database connection from the pool"
CHECKOUT_LESSONS = [
    ("Checkout pool exhausted", "checkout requests waited for a free database connection"),
    ("Checkout latency after deploy", "checkout requests slowed after the deploy doubled workers"),
    ("Database failover paused writes", "the primary database failed over and writes paused"),
    ("Pool sizing for workers", "the connection pool was sized below the worker count again"),
    ("Timeouts on the payments path", "payments requests time out when the provider is slow"),
]


def context(key: str | None = None, actor: str = "test") -> WriteContext:
    return WriteContext(actor=actor, idempotency_key=key or f"test:{uuid.uuid4()}")


def entry(title: str, summary: str, **extra: Any) -> dict[str, Any]:
    return {"title": title, "summary": summary, **extra}


def direction(*weights: tuple[int, float]) -> list[float]:
    """A unit vector with the given (dimension, weight) components."""
    vector = [0.0] * EMBEDDING_DIMENSIONS
    for index, weight in weights:
        vector[index] = weight
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector]


def at_distance(distance: float, axis: int = 1) -> list[float]:
    """A unit vector at the given cosine distance from direction((0, 1))."""
    similarity = 1.0 - distance
    return direction((0, similarity), (axis, math.sqrt(max(0.0, 1 - similarity**2))))


@contextmanager
def database_at(
    database: DatabaseUrls, admin_conn: psycopg.Connection[Any], version: int
) -> Iterator[DatabaseUrls]:
    """A database of its own on the test server, migrated to `version` only; dropped after.

    Today's code writes the entries' `given_tags` (migration 0041): a database at an
    earlier version gets that column ahead (0041 adds it IF NOT EXISTS), so the tests that
    write with today's code and then migrate still can."""
    name = f"grandbo_v{version}_{uuid.uuid4().hex[:8]}"
    admin_conn.execute(f'CREATE DATABASE "{name}"')
    params = {k: str(v) for k, v in conninfo_to_dict(database.admin).items() if v is not None}
    params["dbname"] = name
    admin = make_conninfo("", **params)
    migrate(admin, up_to=version)
    if version < 41:
        with psycopg.connect(admin, autocommit=True) as own:
            own.execute("ALTER TABLE org_memory_entries ADD COLUMN IF NOT EXISTS given_tags text[]")
    try:
        yield DatabaseUrls(admin=admin, app=app_url_for(admin))
    finally:
        admin_conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def log_answer(
    service: Any,
    tenant: str,
    topic: str,
    *,
    incident_id: str | None,
    caller: str = "k",
    asked_at: datetime | None = None,
    **arguments: Any,
) -> Any:
    """`query_org_memory`'s answer, filed in the retrieval log as the runtime's writer
    files it (`RetrievalRecord.of`), asked a minute ago unless `asked_at` says when."""
    from grandbo.memory.domain.retrieval_log import RetrievalRecord

    result = service.query_org_memory(tenant, topic, **arguments)
    at = asked_at or datetime.now(UTC) - timedelta(minutes=1)
    service.repository.log_retrievals(
        [RetrievalRecord.of(tenant, caller, incident_id, topic, result, 1.0, at)]
    )
    return result
