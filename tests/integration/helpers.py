"""Small builders shared by the integration tests."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from grandbo.embedding.base import EMBEDDING_DIMENSIONS
from grandbo.memory.models import WriteContext
from grandbo.migrations import migrate
from grandbo.storage.connections import DatabaseUrls, app_url_for


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
    """A database of its own on the test server, migrated to `version` only; dropped after."""
    name = f"grandbo_v{version}_{uuid.uuid4().hex[:8]}"
    admin_conn.execute(f'CREATE DATABASE "{name}"')
    params = {k: str(v) for k, v in conninfo_to_dict(database.admin).items() if v is not None}
    params["dbname"] = name
    admin = make_conninfo("", **params)
    migrate(admin, up_to=version)
    try:
        yield DatabaseUrls(admin=admin, app=app_url_for(admin))
    finally:
        admin_conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
