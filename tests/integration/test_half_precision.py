"""Vectors at half precision (migration 0015): a lake written at version 14 converts
whole (its HNSW index rebuilt on the new operator class), and a vector of any length is
stored at unit length, so neither range nor rounding changes what is near what."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from grandbo.embedding.base import EMBEDDING_DIMENSIONS, render_entry_text
from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.memory.domain.models import EntryStatus
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.repository.vector_indexes import ensure_hnsw_indexes, index_name
from grandbo.memory.service import MemoryService
from grandbo.migrations import migrate
from grandbo.storage.connections import DatabaseUrls, connect

from .helpers import context, database_at, direction, entry


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
    # what the old contract let in: a value past half precision's range, a vector so
    # short every value would round to 0 (both convert, scaled to unit length)
    vectors[uuid.uuid4()] = [70_000.0 * x for x in direction((0, 1.0), (5, 1.0))]
    vectors[uuid.uuid4()] = [1e-9 * x for x in direction((0, 1.0), (6, 1.0))]
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
        conn.execute("INSERT INTO org_memory_tenants (tenant_id) VALUES ('acme')")
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
            length = math.hypot(*vector)  # stored at unit length, same direction
            assert all(
                math.isclose(a, b / length, abs_tol=1e-3)
                for a, b in zip(row[0].to_list(), vector, strict=True)
            )

    assert ensure_hnsw_indexes(v14_database.admin, min_entries=1) == ["acme"]
    with connect(v14_database.admin) as conn:
        definition = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = %s", (index_name("acme"),)
        ).fetchone()
        assert definition is not None
        assert "halfvec_cosine_ops" in definition[0]


def _scaled(vector: list[float], factor: float) -> list[float]:
    return [x * factor for x in vector]


LESSON = (
    "Checkout pool exhausted",
    POOL_SUMMARY := ("checkout leaked database connections on a retry path until the pool ran dry"),
)
OTHER = ("Pool ran dry on checkout", "on a retry path checkout leaked database connections")
TOPIC = "checkout requests time out waiting for a database connection from the pool"


@pytest.mark.parametrize("factor", [1e5, 1e-9])
def test_a_vector_of_any_length_is_stored_at_unit_length(
    repository: MemoryRepository, tenant: str, factor: float
) -> None:
    near = direction((0, 1.0), (1, 0.5))
    provider = FakeEmbeddingProvider(
        pinned={
            render_entry_text(*LESSON, None): _scaled(near, factor),
            TOPIC: _scaled(direction((0, 1.0)), factor),
        }
    )
    service = MemoryService(repository, provider)
    service.record_entry(tenant, entry(*LESSON), context())

    assert service.embed_pending(tenant) == 1
    result = service.query_org_memory(tenant, TOPIC)

    assert result.metadata.vector_leg == "ok"
    assert result.hits[0].why.vector_distance == pytest.approx(1 - near[0], abs=1e-3)


def test_two_short_vectors_stay_as_far_apart_as_their_directions(
    repository: MemoryRepository, tenant: str
) -> None:
    """Half precision would round these to one vector (their second components to 0) and
    the duplicate rule would merge two lessons 0.09 apart; at unit length they stay apart."""
    tiny = 2.0**-24
    a = [0.0] * EMBEDDING_DIMENSIONS
    a[0], a[1] = tiny, 0.45 * tiny
    b = [0.0] * EMBEDDING_DIMENSIONS
    b[0] = tiny
    provider = FakeEmbeddingProvider(
        pinned={render_entry_text(*LESSON, None): a, render_entry_text(*OTHER, None): b},
        duplicate_distance=0.05,
    )
    service = MemoryService(repository, provider)
    service.record_entry(tenant, entry(*LESSON), context())
    service.embed_pending(tenant)
    second = service.record_entry(tenant, entry(*OTHER), context()).entry
    service.embed_pending(tenant)

    assert service.get_entry(tenant, second.entry_id).status is EntryStatus.ACTIVE
