"""Migration 0015 on a lake written at version 14: vector(1024) with a tenant's HNSW
index becomes halfvec(1024), the vectors survive to half precision, the old index goes
and the index job builds it again on the new operator class."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from grandbo.memory.vector_index import ensure_hnsw_indexes, index_name
from grandbo.migrations import migrate
from grandbo.storage.connections import DatabaseUrls, connect

from .helpers import database_at, direction


@pytest.fixture
def v14_database(
    database: DatabaseUrls, admin_conn: psycopg.Connection[Any]
) -> Iterator[DatabaseUrls]:
    """A database of its own on the test server, migrated to version 14 only."""
    with database_at(database, admin_conn, 14) as urls:
        yield urls


def test_0015_moves_vectors_to_half_precision_and_the_index_is_rebuilt(
    v14_database: DatabaseUrls,
) -> None:
    vectors = {uuid.uuid4(): direction((0, 1.0), (i + 1, 0.1 * (i + 1))) for i in range(3)}
    with connect(v14_database.admin) as conn:
        for entry_id, vector in vectors.items():
            conn.execute(
                "INSERT INTO org_memory_entries (tenant_id, entry_id, title, summary, tags,"
                " origin, status, revision, created_at, updated_at, embedding, embed_rev,"
                " embedded_revision, embedded_at) VALUES ('acme', %s, 'Pool exhausted',"
                " 'connections ran out', '{pool}', 'admin', 'active', 1, now(), now(),"
                " %s::vector, 'rev', 1, now())",
                (entry_id, str(vector)),
            )
        conn.execute(
            f'CREATE INDEX "{index_name("acme")}" ON org_memory_entries'
            " USING hnsw (embedding vector_cosine_ops) WHERE tenant_id = 'acme'"
        )

    migrate(v14_database.admin)

    with connect(v14_database.admin) as conn:
        kind = conn.execute(
            "SELECT format_type(atttypid, atttypmod), attstorage FROM pg_attribute"
            " WHERE attrelid = 'org_memory_entries'::regclass AND attname = 'embedding'"
        ).fetchone()
        assert kind == ("halfvec(1024)", "p")  # PLAIN: rows stay whole (migration 0005)
        assert conn.execute(
            "SELECT count(*) FROM pg_indexes WHERE indexname = %s", (index_name("acme"),)
        ).fetchone() == (0,)
        for entry_id, vector in vectors.items():
            row = conn.execute(
                "SELECT embedding FROM org_memory_entries WHERE entry_id = %s", (entry_id,)
            ).fetchone()
            assert row is not None
            assert all(
                math.isclose(a, b, abs_tol=1e-3)
                for a, b in zip(row[0].to_list(), vector, strict=True)
            )

    assert ensure_hnsw_indexes(v14_database.admin, min_entries=1) == ["acme"]
    with connect(v14_database.admin) as conn:
        definition = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = %s", (index_name("acme"),)
        ).fetchone()
        assert definition is not None
        assert "halfvec_cosine_ops" in definition[0]
