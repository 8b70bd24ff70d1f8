"""Per-tenant HNSW indexes: created past a threshold, used only by that tenant, same answers."""

from __future__ import annotations

from typing import Any

import psycopg

from grandbo.database import DatabaseUrls
from grandbo.service import MemoryService
from grandbo.vector_index import ensure_hnsw_indexes, index_name

from .helpers import context, entry

TOPIC = "checkout requests wait for a database connection and time out"


def test_a_tenant_past_the_threshold_gets_its_own_index_and_the_same_results(
    service: MemoryService,
    tenant: str,
    database: DatabaseUrls,
    admin_conn: psycopg.Connection[Any],
) -> None:
    for i in range(40):
        words = "checkout database connection" if i % 3 == 0 else "kafka consumer lag"
        service.record_entry(tenant, entry(f"Finding {i}", f"{words} case {i}"), context())
    service.embed_pending(tenant)
    exact = service.query_org_memory(tenant, TOPIC, limit=25)

    created = ensure_hnsw_indexes(database.admin, min_entries=40)
    assert tenant in created
    assert ensure_hnsw_indexes(database.admin, min_entries=40) == []  # idempotent
    definition = admin_conn.execute(
        "SELECT indexdef FROM pg_indexes WHERE indexname = %s", (index_name(tenant),)
    ).fetchone()
    assert definition is not None
    assert "USING hnsw (embedding vector_cosine_ops)" in definition[0]
    assert f"tenant_id = '{tenant}'" in definition[0]

    with_index = service.query_org_memory(tenant, TOPIC, limit=25)
    assert [h.entry_id for h in with_index.hits] == [h.entry_id for h in exact.hits]
